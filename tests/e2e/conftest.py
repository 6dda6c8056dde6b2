import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))

import pytest

import iam_proxy
import nifi_cluster
import nifi_instance
from services import local_services  # noqa: F401  (session fixture, for shared_nifi)
from shared_nifi import SharedNiFi


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


_SHARED: list = []  # the session's SharedNiFi, for the summary


@pytest.fixture(scope="session")
def shared_nifi_session(policy_proxies, local_services):  # noqa: F811  (the imported fixture)
    """The NiFi shared by the modules that run in its environment, NAR set and settings (tests/lib/shared_nifi.py),
    whether or not they kill and restart it: started when the first of them begins, stopped at the end of the
    session (before the policy proxies and the emulators it reads through)."""
    shared = SharedNiFi()
    _SHARED.append(shared)
    yield shared
    shared.stop()


@pytest.fixture(scope="session")
def secured_nifi_session(policy_proxies, local_services):  # noqa: F811  (the imported fixture)
    """Like shared_nifi_session, but the NiFi is secured: HTTPS with certificates from a CA the test made, a login
    and authorization (tests/nifi/nifi.sh --secure: our test-only login provider, NiFi's single-user one not being
    served here, and NiFi's file-based managed authorizer). Its client trusts that CA and logs in."""
    shared = SharedNiFi(secure=True)
    _SHARED.append(shared)
    yield shared
    shared.stop()


@pytest.fixture(scope="module")
def secured_nifi(secured_nifi_session, request):
    """This module's view of the secured shared NiFi (as shared_nifi is of the unsecured one)."""
    view = secured_nifi_session.for_module(request.module.__name__)
    yield view
    view.clean()


@pytest.fixture(scope="module")
def shared_nifi(shared_nifi_session, request):
    """This module's view of the shared NiFi: its log from this module's start on (and NiFi's start-up), kill()
    and restart(), and at the module's end every process group, controller service and parameter context the
    module added stopped, emptied and deleted, with NiFi checked to be running and as the module found it
    (tests/lib/shared_nifi.py's ModuleNiFi)."""
    view = shared_nifi_session.for_module(request.module.__name__)
    yield view
    view.clean()


def pytest_terminal_summary(terminalreporter):
    """How many standalone NiFi starts (NiFiInstance.start, restarts included) the session paid for."""
    starts = nifi_instance.STARTS
    if starts:
        shared = "".join(f"; the shared {'secured ' if s.secure else ''}NiFi: {s.starts} fresh start(s), "
                         f"{s.restarts} restart(s)" for s in _SHARED)
        terminalreporter.write_line(f"NiFi starts (NiFiInstance.start, restarts included): {len(starts)}, "
                                    f"{sum(starts):.0f} s in all{shared}")
