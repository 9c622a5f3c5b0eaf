-- Intents (docs/intents.md): their claims, releases and outcomes are
-- entries of the log that move no money, so they carry amount 0 like
-- settings entries. Their current state is a rule_state row of kind
-- 'intent', which needs no schema change.
ALTER TABLE entries DROP CONSTRAINT entries_amount_check;
ALTER TABLE entries ADD CONSTRAINT entries_amount_check
    CHECK (amount > 0 OR (amount = 0 AND kind IN ('account_settings', 'intent_claimed',
        'intent_released', 'intent_succeeded', 'intent_failed')));
