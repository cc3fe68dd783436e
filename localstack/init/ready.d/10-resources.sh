#!/bin/bash
# LocalStack ready hook: create the tables and queues of resources.json
# with awslocal, the same ones localstack/stack.sh creates without Docker.
# Idempotent, so a restarted container with persistence is fine.
#
# LocalStack runs it inside the container once the services are ready;
# docker-compose.yml mounts resources.json at the path below. To try it
# outside LocalStack: RESOURCES=localstack/resources.json AWSLOCAL="aws
# --endpoint-url http://127.0.0.1:PORT" localstack/init/ready.d/10-resources.sh
set -euo pipefail
export RESOURCES=${RESOURCES:-/etc/localstack/lambdaidem/resources.json}
export AWSLOCAL=${AWSLOCAL:-awslocal}
export AWS_DEFAULT_REGION=${AWS_DEFAULT_REGION:-us-east-1}

# python3 reads the JSON (the LocalStack image has it); every call is awslocal.
exec python3 - <<'PY'
import json, os, shlex, subprocess, sys

aws = shlex.split(os.environ["AWSLOCAL"])
spec = json.load(open(os.environ["RESOURCES"]))


def call(*args, ok_codes=()):
    p = subprocess.run(aws + list(args) + ["--output", "json"], capture_output=True, text=True)
    if p.returncode != 0:
        if any(c in p.stderr for c in ok_codes):
            return None
        sys.exit(f"lambdaidem init: {' '.join(args[:2])} failed: {p.stderr.strip()}")
    return json.loads(p.stdout) if p.stdout.strip() else {}


def keyschema(h, r=None):
    ks = [{"AttributeName": h["name"], "KeyType": "HASH"}]
    if r:
        ks.append({"AttributeName": r["name"], "KeyType": "RANGE"})
    return ks


for t in spec["tables"]:
    keys = [t["hashKey"]] + ([t["rangeKey"]] if t.get("rangeKey") else [])
    gsis = []
    for g in t.get("globalSecondaryIndexes", []):
        keys += [g["hashKey"]] + ([g["rangeKey"]] if g.get("rangeKey") else [])
        gsis.append({"IndexName": g["name"], "KeySchema": keyschema(g["hashKey"], g.get("rangeKey")),
                     "Projection": {"ProjectionType": g["projection"]}})
    attrs = {k["name"]: k["type"] for k in keys}
    args = ["dynamodb", "create-table", "--table-name", t["name"], "--billing-mode", "PAY_PER_REQUEST",
            "--attribute-definitions", json.dumps([{"AttributeName": n, "AttributeType": v} for n, v in attrs.items()]),
            "--key-schema", json.dumps(keyschema(t["hashKey"], t.get("rangeKey")))]
    if gsis:
        args += ["--global-secondary-indexes", json.dumps(gsis)]
    call(*args, ok_codes=("ResourceInUseException",))
    call("dynamodb", "wait", "table-exists", "--table-name", t["name"])
    if t.get("ttlAttribute"):
        call("dynamodb", "update-time-to-live", "--table-name", t["name"], "--time-to-live-specification",
             json.dumps({"Enabled": True, "AttributeName": t["ttlAttribute"]}),
             ok_codes=("TimeToLive is already enabled",))
    print(f"lambdaidem init: table {t['name']}")

arns = {}
for q in sorted(spec["queues"], key=lambda q: q.get("redrive") is not None):  # DLQs first
    attrs = {}
    if q.get("fifo"):
        attrs["FifoQueue"] = "true"
    if q.get("visibilityTimeoutSeconds"):
        attrs["VisibilityTimeout"] = str(q["visibilityTimeoutSeconds"])
    if q.get("messageRetentionSeconds"):
        attrs["MessageRetentionPeriod"] = str(q["messageRetentionSeconds"])
    if q.get("redrive"):
        attrs["RedrivePolicy"] = json.dumps({"deadLetterTargetArn": arns[q["redrive"]["deadLetterQueue"]],
                                             "maxReceiveCount": q["redrive"]["maxReceiveCount"]})
    url = call("sqs", "create-queue", "--queue-name", q["name"], "--attributes", json.dumps(attrs))["QueueUrl"]
    got = call("sqs", "get-queue-attributes", "--queue-url", url, "--attribute-names", "QueueArn")
    arns[q["logicalId"]] = got["Attributes"]["QueueArn"]
    print(f"lambdaidem init: queue {q['name']}")
PY
