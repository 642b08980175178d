-- A reports key may be limited to some teams (a team lead's key): NULL sees every team.
ALTER TABLE api_keys ADD COLUMN team_ids bigint[];
