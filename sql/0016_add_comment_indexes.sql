-- The report page's comments: the lowest-scored comments of a period (one index range per score, newest first) and
-- the responses listing narrowed to those with a comment, without walking the ratings that have none.
CREATE INDEX csat_ratings_commented_score_idx ON csat_ratings (score, rated_at DESC, id DESC) WHERE comment <> '';
CREATE INDEX csat_ratings_commented_rated_idx ON csat_ratings (rated_at DESC, id DESC) WHERE comment <> '';
