import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))

import pytest

import nifi_cluster


@pytest.fixture(scope="session", autouse=True)
def no_cluster_left_running():
    """Every NiFi cluster node a test started is stopped at session end, by its PID, even if the
    test's own fixture did not get to it."""
    yield
    nifi_cluster.stop_all_clusters()
