# Sourced by the test scripts: start moto's S3 server from .venv on a free loopback port,
# create the bucket `lake`, export DELTALITE_TEST_S3_ENDPOINT, and stop it on exit.
start_moto() {
    local port
    port="$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    .venv/bin/moto_server -H 127.0.0.1 -p "$port" >/dev/null 2>&1 &
    MOTO_PID=$!
    trap 'kill "$MOTO_PID" 2>/dev/null || true' EXIT
    export DELTALITE_TEST_S3_ENDPOINT="http://127.0.0.1:$port"
    .venv/bin/python - <<PY
import time, boto3
s3 = boto3.client("s3", endpoint_url="$DELTALITE_TEST_S3_ENDPOINT", aws_access_key_id="test",
                  aws_secret_access_key="test", region_name="us-east-1")
for _ in range(100):
    try:
        s3.create_bucket(Bucket="lake")
        break
    except Exception:
        time.sleep(0.1)
else:
    raise SystemExit("moto_server did not come up")
PY
}
