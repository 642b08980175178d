-- The responses listing filtered by agent or team walks only that agent's or team's ratings of the range, newest
-- first, instead of every rating of the range when the filter matches few or none. The expressions are the ones the
-- listing filters on (no agent or team is 0 there).
CREATE INDEX csat_ratings_agent_rated_idx ON csat_ratings ((coalesce(agent_id, 0)), rated_at DESC, id DESC);
CREATE INDEX csat_ratings_team_rated_idx ON csat_ratings ((coalesce(team_id, 0)), rated_at DESC, id DESC);
