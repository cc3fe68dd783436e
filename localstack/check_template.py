#!/usr/bin/env python3
"""Fail when template.yaml disagrees with localstack/resources.json.

The local stack and the tests are built from resources.json; this check
keeps the deployed stack the same: table keys, indexes, TTL and billing;
queue type, visibility, retention and redrive; the function's timeout and
the rules tied to it (visibility >= 6x timeout, maxReceiveCount well above
MAX_ATTEMPTS, partial batch responses, an explicit namespace); and a
Makefile build target for every function. Run by `make test`.

Usage: check_template.py [TEMPLATE]   (default: template.yaml)
Needs PyYAML (present wherever cfn-lint is).
"""
import json
import os
import re
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class CfnLoader(yaml.SafeLoader):
    """Reads CloudFormation's short tags (!Ref, !GetAtt, ...) as the long
    form, so the template compares like the JSON CloudFormation sees."""


def _tag(loader, suffix, node):
    name = "Ref" if suffix == "Ref" else "Fn::" + suffix
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        if suffix == "GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {name: value}


CfnLoader.add_multi_constructor("!", _tag)

errors = []


def check(cond, msg):
    if not cond:
        errors.append(msg)


def keyschema(hash_key, range_key=None):
    ks = [{"AttributeName": hash_key["name"], "KeyType": "HASH"}]
    if range_key:
        ks.append({"AttributeName": range_key["name"], "KeyType": "RANGE"})
    return ks


def check_table(lid, want, got):
    p = got.get("Properties", {})
    check(got.get("Type") == "AWS::DynamoDB::Table", f"{lid}: not an AWS::DynamoDB::Table")
    check(p.get("BillingMode") == "PAY_PER_REQUEST", f"{lid}: BillingMode must be PAY_PER_REQUEST")
    check(p.get("KeySchema") == keyschema(want["hashKey"], want.get("rangeKey")),
          f"{lid}: KeySchema {p.get('KeySchema')} differs from resources.json")
    keys = [want["hashKey"]] + ([want["rangeKey"]] if want.get("rangeKey") else [])
    for g in want.get("globalSecondaryIndexes", []):
        keys += [g["hashKey"]] + ([g["rangeKey"]] if g.get("rangeKey") else [])
    want_attrs = sorted({(k["name"], k["type"]) for k in keys})
    got_attrs = sorted((a["AttributeName"], a["AttributeType"]) for a in p.get("AttributeDefinitions", []))
    check(got_attrs == want_attrs, f"{lid}: AttributeDefinitions {got_attrs}, want {want_attrs}")
    want_gsi = sorted(
        (g["name"], json.dumps(keyschema(g["hashKey"], g.get("rangeKey"))), g["projection"])
        for g in want.get("globalSecondaryIndexes", []))
    got_gsi = sorted(
        (g.get("IndexName"), json.dumps(g.get("KeySchema")), g.get("Projection", {}).get("ProjectionType"))
        for g in p.get("GlobalSecondaryIndexes", []))
    check(got_gsi == want_gsi, f"{lid}: GlobalSecondaryIndexes {got_gsi}, want {want_gsi}")
    ttl = p.get("TimeToLiveSpecification")
    if want.get("ttlAttribute"):
        check(ttl == {"AttributeName": want["ttlAttribute"], "Enabled": True},
              f"{lid}: TimeToLiveSpecification {ttl}, want {want['ttlAttribute']} enabled")
    else:
        check(not ttl or not ttl.get("Enabled"), f"{lid}: TTL enabled but resources.json has none")


def check_queue(lid, want, got):
    p = got.get("Properties", {})
    check(got.get("Type") == "AWS::SQS::Queue", f"{lid}: not an AWS::SQS::Queue")
    check(bool(p.get("FifoQueue", False)) == bool(want.get("fifo")), f"{lid}: FifoQueue differs")
    for field, prop in (("visibilityTimeoutSeconds", "VisibilityTimeout"),
                        ("messageRetentionSeconds", "MessageRetentionPeriod")):
        if field in want:
            check(p.get(prop) == want[field], f"{lid}: {prop} {p.get(prop)}, want {want[field]}")
    rp = p.get("RedrivePolicy")
    r = want.get("redrive")
    if not r:
        check(rp is None, f"{lid}: has a RedrivePolicy that resources.json lacks")
        return
    want_rp = {"deadLetterTargetArn": {"Fn::GetAtt": [r["deadLetterQueue"], "Arn"]},
               "maxReceiveCount": r["maxReceiveCount"]}
    check(rp == want_rp, f"{lid}: RedrivePolicy {rp}, want {want_rp}")


def main():
    with open(os.path.join(ROOT, "localstack", "resources.json")) as f:
        spec = json.load(f)
    with open(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "template.yaml")) as f:
        tpl = yaml.load(f, Loader=CfnLoader)
    res = tpl.get("Resources", {})

    described = {}
    for t in spec["tables"]:
        if t.get("template", True):
            described[t["logicalId"]] = t
            check(t["logicalId"] in res, f"{t['logicalId']}: in resources.json, missing from template.yaml")
            if t["logicalId"] in res:
                check_table(t["logicalId"], t, res[t["logicalId"]])
    queues = {}
    for q in spec["queues"]:
        if q.get("template", True):
            described[q["logicalId"]] = q
            queues[q["logicalId"]] = q
            check(q["logicalId"] in res, f"{q['logicalId']}: in resources.json, missing from template.yaml")
            if q["logicalId"] in res:
                check_queue(q["logicalId"], q, res[q["logicalId"]])
    for lid, r in res.items():
        if r.get("Type") in ("AWS::DynamoDB::Table", "AWS::SQS::Queue"):
            check(lid in described, f"{lid}: in template.yaml but not in resources.json (or marked template: false)")

    timeout = spec["functionTimeoutSeconds"]
    functions = [lid for lid, r in res.items() if r.get("Type") == "AWS::Serverless::Function"]
    check(functions, "template.yaml has no AWS::Serverless::Function")
    with open(os.path.join(ROOT, "Makefile")) as f:
        makefile = f.read()
    m = re.search(r"^FUNCTIONS\s*:?=\s*(.*)$", makefile, re.M)
    check(m and sorted(m.group(1).split()) == sorted(functions),
          f"Makefile FUNCTIONS ({m.group(1).strip() if m else 'missing'}) must list {sorted(functions)}")
    for lid in functions:
        r = res[lid]
        p = r.get("Properties", {})
        check(re.search(rf"^build-{re.escape(lid)}\s*:", makefile, re.M),
              f"{lid}: Makefile has no build-{lid} target (sam build runs it)")
        pkg = re.search(rf"^{re.escape(lid)}_PKG\s*:?=\s*(\S+)\s*$", makefile, re.M)
        check(pkg and str(p.get("CodeUri", "")).rstrip("/") == pkg.group(1).rstrip("/"),
              f"{lid}: CodeUri {p.get('CodeUri')} must equal the Makefile's {lid}_PKG")
        check(r.get("Metadata", {}).get("BuildMethod") == "makefile", f"{lid}: Metadata BuildMethod must be makefile")
        check(p.get("Runtime") == "provided.al2023", f"{lid}: Runtime must be provided.al2023")
        check(p.get("Architectures") == ["arm64"], f"{lid}: Architectures must be [arm64] (make build targets arm64)")
        check(p.get("Handler") == "bootstrap", f"{lid}: Handler must be bootstrap")
        check(p.get("Timeout") == timeout, f"{lid}: Timeout {p.get('Timeout')}, resources.json says {timeout}")
        env = p.get("Environment", {}).get("Variables", {})
        check(isinstance(env.get("IDEMPOTENCY_NAMESPACE"), str) and env.get("IDEMPOTENCY_NAMESPACE"),
              f"{lid}: IDEMPOTENCY_NAMESPACE must be set explicitly (a generated function name changes on replacement)")
        max_attempts = int(env.get("MAX_ATTEMPTS", 5))
        for ename, ev in p.get("Events", {}).items():
            if ev.get("Type") != "SQS":
                continue
            ep = ev.get("Properties", {})
            check("ReportBatchItemFailures" in ep.get("FunctionResponseTypes", []),
                  f"{lid}.{ename}: FunctionResponseTypes must include ReportBatchItemFailures")
            check("MaximumConcurrency" in ep.get("ScalingConfig", {}), f"{lid}.{ename}: set ScalingConfig.MaximumConcurrency")
            qarn = ep.get("Queue", {})
            qid = qarn.get("Fn::GetAtt", [None])[0] if isinstance(qarn, dict) else None
            q = queues.get(qid)
            check(q is not None, f"{lid}.{ename}: Queue must be !GetAtt <a queue of resources.json>.Arn")
            if q:
                check(q.get("visibilityTimeoutSeconds", 30) >= 6 * (p.get("Timeout") or 3),
                      f"{lid}.{ename}: {qid} visibility must be at least 6x the function timeout")
                r = q.get("redrive")
                check(r and r["maxReceiveCount"] >= 2 * max_attempts + 1,
                      f"{lid}.{ename}: {qid} maxReceiveCount must be well above MAX_ATTEMPTS={max_attempts}")

    if errors:
        for e in errors:
            print("check_template: " + e, file=sys.stderr)
        sys.exit(1)
    print(f"check_template: template.yaml matches localstack/resources.json "
          f"({len(described)} resources, {len(functions)} function(s))")


if __name__ == "__main__":
    main()
