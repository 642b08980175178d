-- Team blocks: the agent × team blocks summed per team, one row per zone × level × block × team. A teams' report
-- (not narrowed to agents, channel types or priorities) reads these instead of summing every agent's rows of each
-- block: a tenth of the rows when a team has ten agents. The gateway writes them with the other blocks, in the same
-- statement order and key order; the trigger below keeps them for a writer that does not (the release before this
-- one, during a rolling upgrade), adding each change of an agent × team row to its team's row.
-- Writers wait while the team rows are counted and the trigger is made, so no change falls between the two.
LOCK TABLE csat_blocks IN SHARE ROW EXCLUSIVE MODE;

CREATE TABLE csat_team_blocks (
    zone_id    smallint NOT NULL REFERENCES report_zones (id) ON DELETE CASCADE,
    level      smallint NOT NULL CHECK (level BETWEEN 0 AND 10),
    first_day  date NOT NULL,
    team_id    bigint NOT NULL,
    requests   integer NOT NULL DEFAULT 0,
    responses  integer NOT NULL DEFAULT 0,
    s1 integer NOT NULL DEFAULT 0, s2 integer NOT NULL DEFAULT 0, s3 integer NOT NULL DEFAULT 0,
    s4 integer NOT NULL DEFAULT 0, s5 integer NOT NULL DEFAULT 0,
    PRIMARY KEY (zone_id, level, first_day, team_id) INCLUDE (requests, responses, s1, s2, s3, s4, s5)
);

-- Every rating updates a row per level of its team, shared by all of the team's agents: vacuumed sooner than
-- PostgreSQL's default (a fifth of the table dead), so the reports' index-only reads of recent blocks find their
-- pages all-visible again soon and the dead versions' room is reused.
ALTER TABLE csat_team_blocks SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 200);

INSERT INTO csat_team_blocks (zone_id, level, first_day, team_id, requests, responses, s1, s2, s3, s4, s5)
SELECT zone_id, level, first_day, team_id, sum(requests), sum(responses), sum(s1), sum(s2), sum(s3), sum(s4), sum(s5)
  FROM csat_blocks
 GROUP BY 1, 2, 3, 4;

CREATE FUNCTION csat_blocks_to_team() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    change csat_blocks;
BEGIN
    -- A zone's rows deleted with the zone (its team rows go by the same cascade) or emptied for a new build.
    IF TG_OP = 'DELETE' THEN
        IF NOT EXISTS (SELECT 1 FROM report_zones WHERE id = OLD.zone_id) THEN
            RETURN NULL;
        END IF;
        change := OLD;
        change.requests := -OLD.requests; change.responses := -OLD.responses; change.s1 := -OLD.s1;
        change.s2 := -OLD.s2; change.s3 := -OLD.s3; change.s4 := -OLD.s4; change.s5 := -OLD.s5;
    ELSE
        change := NEW;
        IF TG_OP = 'UPDATE' THEN
            change.requests := NEW.requests - OLD.requests; change.responses := NEW.responses - OLD.responses;
            change.s1 := NEW.s1 - OLD.s1; change.s2 := NEW.s2 - OLD.s2; change.s3 := NEW.s3 - OLD.s3;
            change.s4 := NEW.s4 - OLD.s4; change.s5 := NEW.s5 - OLD.s5;
        END IF;
    END IF;
    INSERT INTO csat_team_blocks AS d (zone_id, level, first_day, team_id, requests, responses, s1, s2, s3, s4, s5)
    VALUES (change.zone_id, change.level, change.first_day, change.team_id, change.requests, change.responses, change.s1,
            change.s2, change.s3, change.s4, change.s5)
    ON CONFLICT (zone_id, level, first_day, team_id) DO UPDATE SET
        requests = d.requests + EXCLUDED.requests, responses = d.responses + EXCLUDED.responses, s1 = d.s1 + EXCLUDED.s1,
        s2 = d.s2 + EXCLUDED.s2, s3 = d.s3 + EXCLUDED.s3, s4 = d.s4 + EXCLUDED.s4, s5 = d.s5 + EXCLUDED.s5;
    RETURN NULL;
END
$$;

-- A writer that keeps team blocks itself says so for its transaction (desk_gateway.team_blocks = on).
CREATE TRIGGER csat_blocks_to_team AFTER INSERT OR UPDATE OR DELETE ON csat_blocks FOR EACH ROW
    WHEN (current_setting('desk_gateway.team_blocks', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION csat_blocks_to_team();
