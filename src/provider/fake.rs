//! The fake provider for tests: in memory, records every call, injectable faults per call.
