-- A tenant's writer remembers balances and rule state between its groups
-- while the head it locks is the head it last committed (ledger/src/store/memory.rs).
-- Anything that rewrites those projections without appending to the log
-- (`tally projections rebuild`) bumps the generation, so no writer trusts
-- what it remembers across such a rewrite.
ALTER TABLE ledger_heads ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
