-- The LSH band keys were written with every signature (four rows, two indexes and a foreign key each) and
-- read by nothing: each process finds candidates in its in-memory SignatureIndex (plugins/docs/dedup.ts),
-- filled from dedup_signatures. This version no longer writes them. Their rows go now; the table itself stays,
-- empty, so that a process of an earlier version still running beside this one (an upgrade of the API and
-- worker processes one machine at a time) keeps finishing its documents. A later migration drops it.
TRUNCATE dedup_bands;
