-- One import at a time into a KB (issue 39): the same archive sent twice at once, or a resume while the first
-- attempt still runs, waits for the holder instead of writing the same documents beside it. The holder renews
-- held_until while it works; a holder that died (kill -9, a lost machine) is taken over once held_until passes.
ALTER TABLE kb_transfers ADD COLUMN holder text;
ALTER TABLE kb_transfers ADD COLUMN held_until timestamptz;
