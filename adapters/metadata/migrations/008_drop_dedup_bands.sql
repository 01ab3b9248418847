-- The LSH band keys were written with every signature (four rows, two indexes and a foreign key each) and
-- read by nothing: each process finds candidates in its in-memory SignatureIndex (plugins/docs/dedup.ts),
-- filled from dedup_signatures.
DROP TABLE dedup_bands;
