-- A six-hour rollup level (resolution 21600), so the widest chart (90 days: 360 points of six
-- hours) reads one row per point instead of six hour rows. SQLite cannot widen a CHECK in
-- place, so `fleet_rollups` is rebuilt with the same columns, then the new level is filled
-- from the hour rows already stored (from now on `db::fleet_samples::insert` writes it with
-- every sample, like the others).

CREATE TABLE fleet_rollups_next (
    fleet_id      INTEGER NOT NULL REFERENCES fleets(id) ON DELETE CASCADE,
    resolution    INTEGER NOT NULL CHECK (resolution IN (60, 3600, 21600)),
    bucket        INTEGER NOT NULL,
    samples       INTEGER NOT NULL,
    ok_samples    INTEGER NOT NULL,
    spare_min     INTEGER,
    spare_max     INTEGER,
    spare_last    INTEGER,
    required_min  INTEGER,
    required_max  INTEGER,
    required_last INTEGER,
    last_at       INTEGER NOT NULL,
    source_last   TEXT    NOT NULL,
    PRIMARY KEY (fleet_id, resolution, bucket)
) WITHOUT ROWID;

INSERT INTO fleet_rollups_next
    (fleet_id, resolution, bucket, samples, ok_samples, spare_min, spare_max, spare_last,
     required_min, required_max, required_last, last_at, source_last)
SELECT fleet_id, resolution, bucket, samples, ok_samples, spare_min, spare_max, spare_last,
       required_min, required_max, required_last, last_at, source_last
FROM fleet_rollups;

DROP TABLE fleet_rollups;
ALTER TABLE fleet_rollups_next RENAME TO fleet_rollups;
CREATE INDEX fleet_rollups_resolution_bucket ON fleet_rollups (resolution, bucket);

-- Six hours = six hour buckets: counts add up, min of mins, max of maxes; "last" and the source
-- are those of the newest hour that had an ok sample (`none` when no hour had one).
INSERT INTO fleet_rollups
    (fleet_id, resolution, bucket, samples, ok_samples, spare_min, spare_max, spare_last,
     required_min, required_max, required_last, last_at, source_last)
SELECT h.fleet_id, 21600, (h.bucket / 21600000) * 21600000,
       sum(h.samples), sum(h.ok_samples), min(h.spare_min), max(h.spare_max),
       (SELECT l.spare_last FROM fleet_rollups l
         WHERE l.fleet_id = h.fleet_id AND l.resolution = 3600 AND l.ok_samples > 0
           AND l.bucket / 21600000 = h.bucket / 21600000
         ORDER BY l.bucket DESC LIMIT 1),
       min(h.required_min), max(h.required_max),
       (SELECT l.required_last FROM fleet_rollups l
         WHERE l.fleet_id = h.fleet_id AND l.resolution = 3600 AND l.ok_samples > 0
           AND l.bucket / 21600000 = h.bucket / 21600000
         ORDER BY l.bucket DESC LIMIT 1),
       max(h.last_at),
       coalesce((SELECT l.source_last FROM fleet_rollups l
                  WHERE l.fleet_id = h.fleet_id AND l.resolution = 3600 AND l.ok_samples > 0
                    AND l.bucket / 21600000 = h.bucket / 21600000
                  ORDER BY l.bucket DESC LIMIT 1), 'none')
FROM fleet_rollups h
WHERE h.resolution = 3600
GROUP BY h.fleet_id, h.bucket / 21600000;
