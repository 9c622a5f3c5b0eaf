//! What the server's writers did during a scenario, from `GET /metrics`:
//! how many groups committed, how large, how long each commit took, and
//! how many requests were answered without a group. With the CPU shares
//! ([`crate::cpu`]) it tells a figure bound by the commit cycle from one
//! bound by CPU.

use crate::http_load::Target;

/// The writer counters of `/metrics` at one moment.
#[derive(Debug, Clone, Default)]
pub struct WriterCounters {
    groups: f64,
    requests_in_groups: f64,
    commit_seconds: f64,
    answered_before_group: f64,
    answered_from_recent: f64,
    /// Groups whose write found a key taken (a replay sent without a
    /// look-up, or a key taken since its look-up): nothing written, decided
    /// again with every key looked up.
    key_taken: f64,
    look_up_queries: f64,
    keys_looked_up: f64,
    /// Shared commit rounds, and the groups (or writes decided ahead) in them.
    rounds: f64,
    round_groups: f64,
    /// Groups decided from the writer's memory (written without a read
    /// under the lock), and those of them decided again.
    decided_ahead: f64,
    decided_ahead_redone: f64,
    /// Bytes held by the recent-entries cache (shared by every tenant,
    /// bounded by `--recent-entries-mib`), and tenants with a writer.
    pub recent_bytes: f64,
    pub tenant_writers: f64,
}

impl WriterCounters {
    pub async fn read(target: &Target) -> Option<Self> {
        Some(Self::parse(&target.metrics().await.ok()?))
    }

    fn parse(text: &str) -> Self {
        let value = |name: &str| sample(text, name).unwrap_or(0.0);
        Self {
            groups: value("tally_writer_group_size_count"),
            requests_in_groups: value("tally_writer_group_size_sum"),
            commit_seconds: value("tally_writer_commit_duration_seconds_sum"),
            answered_before_group: value("tally_writer_answered_before_group_total"),
            answered_from_recent: value("tally_writer_answered_from_recent_total"),
            key_taken: value("tally_writer_groups_key_taken_total"),
            look_up_queries: value("tally_writer_look_up_queries_total"),
            keys_looked_up: value("tally_writer_keys_looked_up_total"),
            rounds: value("tally_commit_rounds_total"),
            round_groups: value("tally_commit_round_groups_total"),
            decided_ahead: value("tally_writer_groups_decided_ahead_total"),
            decided_ahead_redone: value("tally_writer_groups_decided_ahead_redone_total"),
            recent_bytes: value("tally_recent_entries_bytes"),
            tenant_writers: value("tally_writer_tenants"),
        }
    }

    /// One line on what happened from `self` to `later`, over `seconds`.
    pub fn describe(&self, later: &WriterCounters, seconds: f64) -> String {
        let groups = later.groups - self.groups;
        let requests = later.requests_in_groups - self.requests_in_groups;
        let commit = later.commit_seconds - self.commit_seconds;
        let before = later.answered_before_group - self.answered_before_group;
        let recent = later.answered_from_recent - self.answered_from_recent;
        let taken = later.key_taken - self.key_taken;
        let queries = later.look_up_queries - self.look_up_queries;
        let keys = later.keys_looked_up - self.keys_looked_up;
        let rounds = later.rounds - self.rounds;
        let round_groups = later.round_groups - self.round_groups;
        let ahead = later.decided_ahead - self.decided_ahead;
        let redone = later.decided_ahead_redone - self.decided_ahead_redone;
        let per_group = |x: f64| if groups > 0.0 { x / groups } else { 0.0 };
        format!(
            "writer: {:.0} groups/s of {:.1} requests, commit {:.2} ms each; \
             answered without a group: {:.0}/s looked up, {:.0}/s from memory; \
             {:.0} groups found a key taken; \
             look-ups: {:.0} queries/s of {:.1} keys; \
             commits: {:.0} rounds/s of {:.1} groups; \
             decided ahead: {:.0} % of groups ({:.0} redone)",
            groups / seconds.max(1e-9),
            per_group(requests),
            per_group(commit) * 1e3,
            before / seconds.max(1e-9),
            recent / seconds.max(1e-9),
            taken,
            queries / seconds.max(1e-9),
            if queries > 0.0 { keys / queries } else { 0.0 },
            rounds / seconds.max(1e-9),
            if rounds > 0.0 {
                round_groups / rounds
            } else {
                0.0
            },
            per_group(ahead) * 100.0,
            redone,
        )
    }
}

/// The value of the unlabelled sample `name` in a `/metrics` text.
pub fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .find_map(|v| v.trim().parse::<f64>().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_by_exact_name_and_differenced() {
        let before = WriterCounters::parse(
            "# HELP x\ntally_writer_group_size_count 10\ntally_writer_group_size_sum 300\n\
             tally_writer_group_size_bucket{le=\"1\"} 2\n\
             tally_writer_commit_duration_seconds_sum 0.02\n",
        );
        let after = WriterCounters::parse(
            "tally_writer_group_size_count 110\ntally_writer_group_size_sum 3300\n\
             tally_writer_commit_duration_seconds_sum 0.32\n\
             tally_writer_answered_before_group_total 500\n\
             tally_writer_answered_from_recent_total 100\n\
             tally_writer_groups_key_taken_total 3\n\
             tally_writer_look_up_queries_total 40\n\
             tally_writer_keys_looked_up_total 500\n\
             tally_commit_rounds_total 20\n\
             tally_commit_round_groups_total 100\n\
             tally_writer_groups_decided_ahead_total 25\n\
             tally_writer_groups_decided_ahead_redone_total 2\n",
        );
        assert_eq!(
            before.describe(&after, 2.0),
            "writer: 50 groups/s of 30.0 requests, commit 3.00 ms each; \
             answered without a group: 250/s looked up, 50/s from memory; \
             3 groups found a key taken; look-ups: 20 queries/s of 12.5 keys; \
             commits: 10 rounds/s of 5.0 groups; decided ahead: 25 % of groups (2 redone)"
        );
    }
}
