-- Absorption headroom (issue 17): whether a fleet can lose its worst node (or region) and
-- re-place every workload on the members left. Per sample: the verdict (1 absorbed, 0 short,
-- NULL when no member's load was read), the machines of the restore config that would close
-- the shortfall (NULL when no number can) and the whole answer as JSON (worst losses and what
-- is short, the basis). Rollups keep the worst verdict and the most machines needed of their
-- bucket, like spare_min/required_max; the fleet's status row keeps the latest answer.
ALTER TABLE fleet_samples ADD COLUMN absorbed INTEGER;
ALTER TABLE fleet_samples ADD COLUMN machines_needed INTEGER;
ALTER TABLE fleet_samples ADD COLUMN absorption TEXT;
ALTER TABLE fleet_rollups ADD COLUMN absorbed_min INTEGER;
ALTER TABLE fleet_rollups ADD COLUMN machines_needed_max INTEGER;
ALTER TABLE fleet_status ADD COLUMN absorption TEXT;
