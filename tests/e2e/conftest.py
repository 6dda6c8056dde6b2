import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))

import pytest

import iam_proxy
import nifi_cluster


@pytest.fixture(scope="session", autouse=True)
def policy_proxies():
    """The policy proxies live until every NiFi of the session is gone (a processor left running
    must not see its endpoint vanish)."""
    yield
    nifi_cluster.stop_all_clusters()
    iam_proxy.stop_all()


@pytest.fixture(autouse=True)
def snowflake_iam_policy_holds(policy_proxies):
    """Each ConsumeKinesis of these tests reaches the emulators through Snowflake's IAM policy
    (tests/lib/iam_proxy.py): a test fails if a proxy denied a call while it ran."""
    before = iam_proxy.denials()
    yield
    denials = iam_proxy.new_denials(before, iam_proxy.denials())
    assert not denials, f"calls outside Snowflake's IAM policy: {denials[:20]}"
