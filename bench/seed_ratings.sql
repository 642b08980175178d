-- 1,000,000 CSAT ratings and 1,250,000 requests over two years: 200 agents in 20 teams, 3 channel types,
-- 4 priorities, scores skewed towards 4 and 5. Deterministic (setseed) so runs compare.
SELECT setseed(0.42);
TRUNCATE csat_ratings, csat_requests, csat_detail_blocks, csat_blocks, csat_team_blocks, report_zones;
INSERT INTO teams (id, key, name)
SELECT 100 + t, 'team-' || t, 'Team ' || t FROM generate_series(1, 20) AS t
ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name;
INSERT INTO agents (id, display_name, sendbird_id)
SELECT 1000 + a, 'Agent ' || a, 'agent-' || a FROM generate_series(1, 200) AS a
ON CONFLICT (id) DO UPDATE SET display_name = EXCLUDED.display_name;
INSERT INTO csat_ratings (ticket_id, message_id, score, comment, agent_id, team_id, channel_type, priority, rated_at, source)
SELECT 1000000 + n, 1,
       (ARRAY[1, 2, 3, 3, 4, 4, 4, 5, 5, 5])[1 + floor(random() * 10)::int],
       CASE WHEN n % 7 = 0 THEN 'comment ' || n END,
       1000 + a, 100 + (a % 20) + 1,
       (ARRAY['SENDBIRD_JAVASCRIPT', 'SENDBIRD_IOS', 'SENDBIRD_ANDROID'])[1 + n % 3],
       (ARRAY['LOW', 'MEDIUM', 'HIGH', 'URGENT'])[1 + (n / 3) % 4],
       now() - random() * interval '730 days', 'sync'
  FROM generate_series(1, 1000000) AS n, LATERAL (SELECT 1 + (n::bigint * 7919) % 200 AS a) AS pick;
INSERT INTO csat_requests (ticket_id, message_id, agent_id, team_id, channel_type, priority, requested_at)
SELECT 3000000 + n, 1, 1000 + a, 100 + (a % 20) + 1,
       (ARRAY['SENDBIRD_JAVASCRIPT', 'SENDBIRD_IOS', 'SENDBIRD_ANDROID'])[1 + n % 3],
       (ARRAY['LOW', 'MEDIUM', 'HIGH', 'URGENT'])[1 + (n / 3) % 4],
       now() - random() * interval '730 days'
  FROM generate_series(1, 1250000) AS n, LATERAL (SELECT 1 + (n::bigint * 104729) % 200 AS a) AS pick;
ANALYZE csat_ratings;
ANALYZE csat_requests;
