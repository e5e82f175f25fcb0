# SPDX-License-Identifier: Apache-2.0
"""The Kubernetes API emulator driven by Debian's python3-kubernetes (CoordinationV1Api, CoreV1Api).

Run by k8s_emulator_clients_test.sh with Debian's /usr/bin/python3:
    k8s_emulator_clients_test.py KUBECONFIG NAMESPACE
KUBECONFIG points at a running emulator (HTTPS, a bearer token allowed everything on Leases and
get/list on Nodes and Namespaces); NAMESPACE is one of its namespaces, empty of Leases. Each check
asserts the exact HTTP status, the client's reason phrase and the Status body kube-apiserver
answers; prints PASS/FAIL lines (with what it got) and "N passed, M failed"; exits 1 on a failure.
"""
import json
import sys
import traceback
import uuid

from kubernetes import client, config
from kubernetes.client.rest import ApiException

kubeconfig, ns = sys.argv[1], sys.argv[2]
config.load_kube_config(config_file=kubeconfig)
coord = client.CoordinationV1Api()
core = client.CoreV1Api()
results = {"passed": 0, "failed": 0}


def check(what, fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - a failed check is reported, not raised
        results["failed"] += 1
        print(f"FAIL {what}")
        detail = str(e) if isinstance(e, AssertionError) else traceback.format_exc(limit=3)
        for line in detail.splitlines()[:12]:
            print(f"    {line}")
        return
    results["passed"] += 1
    print(f"PASS {what}")


def expect(cond, got):
    if not cond:
        raise AssertionError(f"got: {got}")


def lease(name, rv=None, uid=None, holder="node-a", labels=None, finalizers=None):
    md = {"name": name}
    if labels is not None:
        md["labels"] = labels
    if rv is not None:
        md["resourceVersion"] = rv
    if uid is not None:
        md["uid"] = uid
    if finalizers is not None:
        md["finalizers"] = finalizers
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": md,
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 30,
                 "renewTime": "2026-11-24T18:00:00.000000Z"},
    }


def api_error(fn):
    """Calls fn, which must raise ApiException; returns (status, reason, body as JSON)."""
    try:
        fn()
    except ApiException as e:
        try:
            body = json.loads(e.body)
        except (TypeError, ValueError):
            body = e.body
        return e.status, e.reason, body
    raise AssertionError("the call succeeded; an error was expected")


def expect_status(got, status, reason, api_reason, message=None, details=None):
    code, phrase, body = got
    ok = (code == status and phrase == reason and isinstance(body, dict) and body.get("kind") == "Status"
          and body.get("status") == "Failure" and body.get("code") == status and body.get("reason") == api_reason)
    if message is not None:
        ok = ok and body.get("message") == message
    if details is not None:
        ok = ok and body.get("details") == details
    expect(ok, f"{code} {phrase} {json.dumps(body)}")


state = {}


def create_201():
    obj, code, _ = coord.create_namespaced_lease_with_http_info(ns, lease("py1", labels={"app": "x"}))
    expect(code == 201 and obj.metadata.resource_version and obj.metadata.uid and obj.spec.holder_identity == "node-a",
           f"{code} {obj}")
    state["rv1"], state["uid1"] = obj.metadata.resource_version, obj.metadata.uid


def create_409():
    expect_status(api_error(lambda: coord.create_namespaced_lease(ns, lease("py1"))), 409, "Conflict", "AlreadyExists",
                  'leases.coordination.k8s.io "py1" already exists',
                  {"name": "py1", "group": "coordination.k8s.io", "kind": "leases"})


def read_200():
    obj, code, _ = coord.read_namespaced_lease_with_http_info("py1", ns)
    expect(code == 200 and obj.metadata.resource_version == state["rv1"] and obj.metadata.uid == state["uid1"],
           f"{code} {obj.metadata}")


def put_without_rv_422():
    got = api_error(lambda: coord.replace_namespaced_lease("py1", ns, lease("py1", holder="node-b")))
    expect_status(got, 422, "Unprocessable Entity", "Invalid",
                  'leases.coordination.k8s.io "py1" is invalid: metadata.resourceVersion: Invalid value: 0x0: '
                  'must be specified for an update',
                  {"name": "py1", "group": "coordination.k8s.io", "kind": "leases",
                   "causes": [{"reason": "FieldValueInvalid", "message": "Invalid value: 0x0: must be specified for an update",
                               "field": "metadata.resourceVersion"}]})


def put_200():
    obj, code, _ = coord.replace_namespaced_lease_with_http_info("py1", ns, lease("py1", rv=state["rv1"], holder="node-b", labels={"app": "x"}))
    expect(code == 200 and obj.spec.holder_identity == "node-b" and int(obj.metadata.resource_version) > int(state["rv1"])
           and obj.metadata.uid == state["uid1"], f"{code} {obj}")
    state["rv2"] = obj.metadata.resource_version


def put_stale_409():
    got = api_error(lambda: coord.replace_namespaced_lease("py1", ns, lease("py1", rv=state["rv1"], holder="node-c")))
    expect_status(got, 409, "Conflict", "Conflict",
                  'Operation cannot be fulfilled on leases.coordination.k8s.io "py1": the object has been modified; '
                  "please apply your changes to the latest version and try again",
                  {"name": "py1", "group": "coordination.k8s.io", "kind": "leases"})


def list_selectors():
    coord.create_namespaced_lease(ns, lease("py2", labels={"app": "y"}))
    coord.create_namespaced_lease(ns, lease("py3"))

    def names(sel):
        return sorted(i.metadata.name for i in coord.list_namespaced_lease(ns, label_selector=sel).items)
    got = {s: names(s) for s in ["app=x", "app in (x,y)", "app notin (x)", "app", "!app", "app!=y"]}
    expect(got == {"app=x": ["py1"], "app in (x,y)": ["py1", "py2"], "app notin (x)": ["py2", "py3"],
                   "app": ["py1", "py2"], "!app": ["py3"], "app!=y": ["py1", "py3"]}, got)


def bad_selector_400():
    for sel, message in [
        ("a==b=c", "found '=', expected: ',' or 'end of string'"),
        ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("app:x", "unable to parse requirement: <nil>: Invalid value: \"app:x\": name part must consist of alphanumeric "
                  "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  "
                  "or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
    ]:
        got = api_error(lambda s=sel: coord.list_namespaced_lease(ns, label_selector=s))
        expect_status(got, 400, "Bad Request", "BadRequest", message)
        expect("details" not in got[2], got)


def delete_status():
    st, code, _ = coord.delete_namespaced_lease_with_http_info("py1", ns)
    expect(code == 200 and isinstance(st, client.V1Status) and st.status == "Success" and st.details.name == "py1"
           and st.details.group == "coordination.k8s.io" and st.details.kind == "leases" and st.details.uid == state["uid1"],
           f"{code} {st}")
    expect_status(api_error(lambda: coord.read_namespaced_lease("py1", ns)), 404, "Not Found", "NotFound",
                  'leases.coordination.k8s.io "py1" not found')


def put_deleted_with_uid_409():
    got = api_error(lambda: coord.replace_namespaced_lease("py1", ns, lease("py1", rv=state["rv2"], uid=state["uid1"])))
    expect_status(got, 409, "Conflict", "Conflict",
                  'Operation cannot be fulfilled on leases.coordination.k8s.io "py1": StorageError: invalid object, '
                  f"Code: 4, Key: /registry/leases/{ns}/py1, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: "
                  f"UID in precondition: {state['uid1']}, UID in object meta: ")
    expect_status(api_error(lambda: coord.read_namespaced_lease("py1", ns)), 404, "Not Found", "NotFound")


def put_deleted_with_rv_201():
    obj, code, _ = coord.replace_namespaced_lease_with_http_info("py1", ns, lease("py1", rv=state["rv2"]))
    expect(code == 201 and obj.metadata.uid != state["uid1"] and obj.metadata.resource_version != state["rv2"],
           f"{code} {obj.metadata}")


def namespace_not_found_404():
    got = api_error(lambda: coord.create_namespaced_lease("nonexistent", lease("py9")))
    expect_status(got, 404, "Not Found", "NotFound", 'namespaces "nonexistent" not found',
                  {"name": "nonexistent", "kind": "namespaces"})
    got = api_error(lambda: coord.replace_namespaced_lease("py9", "nonexistent", lease("py9")))
    expect_status(got, 404, "Not Found", "NotFound", 'namespaces "nonexistent" not found')


def invalid_label_422():
    got = api_error(lambda: coord.create_namespaced_lease(ns, lease("py8", labels={"app": "not valid!"})))
    code, phrase, body = got
    expect(code == 422 and phrase == "Unprocessable Entity" and body.get("reason") == "Invalid"
           and body["details"]["kind"] == "Lease" and body["details"]["causes"][0]["field"] == "metadata.labels"
           and body["message"].startswith('Lease.coordination.k8s.io "py8" is invalid: metadata.labels: Invalid value: '
                                          '"not valid!": a valid label must be'), got)


def finalizers():
    obj = coord.create_namespaced_lease(ns, lease("pyf", finalizers=["example.com/keep"]))
    # The first DELETE: 200 with the Lease (not a Status), marked for deletion.
    r = coord.delete_namespaced_lease("pyf", ns, _preload_content=False)
    body = json.loads(r.data)
    expect(r.status == 200 and body["kind"] == "Lease" and body["metadata"].get("deletionTimestamp")
           and body["metadata"].get("deletionGracePeriodSeconds") == 0
           and body["metadata"]["finalizers"] == ["example.com/keep"], f"{r.status} {body}")
    # With orphanDependents=false: 202 Accepted.
    r = coord.delete_namespaced_lease("pyf", ns, body=client.V1DeleteOptions(orphan_dependents=False),
                                      _preload_content=False)
    expect(r.status == 202 and json.loads(r.data)["kind"] == "Lease", f"{r.status} {r.data[:300]}")
    cur = coord.read_namespaced_lease("pyf", ns)
    expect(cur.metadata.deletion_timestamp is not None and cur.metadata.uid == obj.metadata.uid, cur.metadata)
    # No new finalizer while it is being deleted.
    more = lease("pyf", rv=cur.metadata.resource_version, finalizers=["example.com/keep", "example.com/more"])
    got = api_error(lambda: coord.replace_namespaced_lease("pyf", ns, more))
    expect_status(got, 422, "Unprocessable Entity", "Invalid")
    expect(got[2]["details"]["causes"][0]["message"] == 'Forbidden: no new finalizers can be added if the object is being '
           'deleted, found new finalizers []string{"example.com/more"}', got)
    # Removing the last finalizer deletes it.
    _, code, _ = coord.replace_namespaced_lease_with_http_info("pyf", ns, lease("pyf", rv=cur.metadata.resource_version))
    expect(code == 200, code)
    expect_status(api_error(lambda: coord.read_namespaced_lease("pyf", ns)), 404, "Not Found", "NotFound")


def delete_preconditions_409():
    obj = coord.read_namespaced_lease("py2", ns)
    wrong = str(uuid.uuid4())
    got = api_error(lambda: coord.delete_namespaced_lease(
        "py2", ns, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=wrong))))
    expect_status(got, 409, "Conflict", "Conflict",
                  f'Operation cannot be fulfilled on Lease.coordination.k8s.io "py2": the UID in the precondition ({wrong}) '
                  f"does not match the UID in record ({obj.metadata.uid}). The object might have been deleted and then recreated",
                  {"name": "py2", "group": "coordination.k8s.io", "kind": "Lease"})
    st = coord.delete_namespaced_lease("py2", ns, body=client.V1DeleteOptions(
        preconditions=client.V1Preconditions(uid=obj.metadata.uid, resource_version=obj.metadata.resource_version)))
    expect(st.status == "Success" and st.details.name == "py2", st)


def core_reads():
    names = sorted(n.metadata.name for n in core.list_namespace().items)
    expect({"default", "kube-system", "kube-public", "kube-node-lease"} <= set(names), names)
    n = core.read_namespace("kube-system")
    expect(n.status.phase == "Active" and n.metadata.labels.get("kubernetes.io/metadata.name") == "kube-system", n)
    expect_status(api_error(lambda: core.read_namespace("nonexistent")), 404, "Not Found", "NotFound",
                  'namespaces "nonexistent" not found', {"name": "nonexistent", "kind": "namespaces"})
    nodes = [x.metadata.name for x in core.list_node().items]
    expect(nodes == ["node-a"], nodes)
    node = core.read_node("node-a")
    expect(node.metadata.name == "node-a" and any(c.type == "Ready" and c.status == "True" for c in node.status.conditions),
           node.status)
    expect_status(api_error(lambda: core.read_node("node-z")), 404, "Not Found", "NotFound", 'nodes "node-z" not found')


def post_with_rv_500():
    got = api_error(lambda: coord.create_namespaced_lease(ns, lease("py7", rv="12")))
    code, phrase, body = got
    expect(code == 500 and phrase == "Internal Server Error" and "reason" not in body
           and body["message"] == "resourceVersion should not be set on objects to be created", got)


def dry_run_201():
    obj, code, _ = coord.create_namespaced_lease_with_http_info(ns, lease("pydry"), dry_run="All")
    expect(code == 201 and obj.metadata.uid and not obj.metadata.resource_version, f"{code} {obj.metadata}")
    expect_status(api_error(lambda: coord.read_namespaced_lease("pydry", ns)), 404, "Not Found", "NotFound")
    got = api_error(lambda: coord.create_namespaced_lease(ns, lease("pydry"), dry_run="Maybe"))
    expect_status(got, 422, "Unprocessable Entity", "Invalid",
                  'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"Maybe"}: supported values: "All"')


def decode_error_400():
    bad = lease("py6")
    bad["spec"]["renewTime"] = "2026-11-24T18:00:00Z"
    got = api_error(lambda: coord.create_namespaced_lease(ns, bad))
    expect_status(got, 400, "Bad Request", "BadRequest",
                  'Lease in version "v1" cannot be handled as a Lease: parsing time "2026-11-24T18:00:00Z" as '
                  '"2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" as ".000000"')


check("create: 201 with uid and resourceVersion", create_201)
check("create of an existing name: 409 AlreadyExists", create_409)
check("read: 200, the same uid and resourceVersion", read_200)
check("replace without resourceVersion: 422 Invalid, metadata.resourceVersion 0x0", put_without_rv_422)
check("replace with the current resourceVersion: 200", put_200)
check("replace with a stale resourceVersion: 409 Conflict, the object has been modified", put_stale_409)
check("list by label selectors, equality and set-based", list_selectors)
check("invalid label selectors: 400 BadRequest with the parser's message", bad_selector_400)
check("delete: 200, a V1Status Success naming the Lease (name, group, kind leases, uid)", delete_status)
check("replace of the deleted Lease with its uid: 409, the storage precondition", put_deleted_with_uid_409)
check("replace of the deleted Lease with a resourceVersion and no uid: 201 (create-on-update)", put_deleted_with_rv_201)
check("create and replace in a namespace that does not exist: 404 namespaces not found", namespace_not_found_404)
check("an invalid label value: 422 Invalid at metadata.labels", invalid_label_422)
check("finalizers: delete 200 with the object, 202 with orphanDependents=false, no new finalizer, removal deletes",
      finalizers)
check("delete preconditions: 409 with rest.BeforeDelete's message, then 200", delete_preconditions_409)
check("CoreV1Api: namespaces and nodes (get, list, 404)", core_reads)
check("create with a resourceVersion: 500 without a reason", post_with_rv_500)
check("a renewTime that is not a MicroTime: 400, the decoder's message", decode_error_400)
check("create with dryRun=All: 201, nothing stored; dryRun=Maybe: 422 CreateOptions", dry_run_201)
print(f"{results['passed']} passed, {results['failed']} failed")
sys.exit(1 if results["failed"] else 0)
