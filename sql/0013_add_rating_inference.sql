-- What a rating row knows only by inference, so Desk's own word can correct it later:
-- inferred: the answer was read from the ticket's score, not from the CSAT message (a message answer replaces it);
-- attribution_inferred: the agent and team came from the gateway's cached ticket, not from Desk (the request's
-- attribution, or a later Desk event, replaces them).
ALTER TABLE csat_ratings ADD COLUMN inferred boolean NOT NULL DEFAULT false,
                         ADD COLUMN attribution_inferred boolean NOT NULL DEFAULT false;
-- An empty comment and no comment are one value (the JS SDK sends '').
UPDATE csat_ratings SET comment = NULL WHERE comment = '';
