"""Fault injection: episodes against a server answering every request with a random fault. Whatever it does,
no exception escapes, every call has a status with a reason, spend stays within the cap, the deadline holds
and every trajectory reads back. ``benchmarks/bench_faults.py`` runs the heavy version."""

from support.faults import run_campaign


def test_random_server_faults_never_escape_overspend_or_outlast_the_deadline() -> None:
    campaign = run_campaign(seed=11, episodes=8)
    assert campaign.violations == []
    assert campaign.episodes == 8 and campaign.calls >= 8 * 4
    assert len(campaign.faults) >= 8, f"too few kinds of fault drawn: {campaign.faults}"
    assert set(campaign.statuses) <= {"OK", "EXEC_ERR", "TIMEOUT"}
