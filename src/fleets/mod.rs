//! Fleets: the yubaba clusters headroom watches and restores. Operations check the caller's
//! role, validate, and write the change with its audit entry in one transaction.
