-- Training rewards per recorded request, read by the RL export (livehost/training/export.py) and
-- written by `livehost trajectories score` (livehost/training/rewards.py). Columns as the export
-- reads them (to_jsonb of the row; the reward keys plus `judge`): accuracy 0/1, effectiveness
-- 0/0.5/1, tool_rationality and skill_selection in [0, 1]; NULL = not applicable to the request.
CREATE TABLE IF NOT EXISTS trajectory_rewards (
    request_id        text PRIMARY KEY REFERENCES trajectories(request_id) ON DELETE CASCADE,
    accuracy          real CHECK (accuracy IN (0, 1)),
    effectiveness     real CHECK (effectiveness IN (0, 0.5, 1)),
    tool_rationality  real CHECK (tool_rationality BETWEEN 0 AND 1),
    skill_selection   real CHECK (skill_selection BETWEEN 0 AND 1),
    judge             text NOT NULL,
    reasons           jsonb NOT NULL DEFAULT '{}'::jsonb,
    scored_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS trajectory_rewards_judge_idx ON trajectory_rewards (judge, scored_at);
