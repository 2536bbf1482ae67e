"""An S3-compatible object store for tests and the container check: moto's server (PyPI moto[server]), which
answers the S3 API as AWS does and, with authentication on, checks every request's Signature Version 4 against the
secret of an IAM user it knows, and the user's policy.

    s3_standin.py PORT BUCKET           tests: an IAM user allowed s3:* and the bucket are made, then authentication
                                        is enforced; prints "ready <access key id> <secret access key>", stops when
                                        stdin closes.
    s3_standin.py --local PORT BUCKET   the container check: the bucket, on 0.0.0.0, any credentials accepted.
"""
import json
import sys
import threading
import urllib.request

import boto3
from moto.server import ThreadedMotoServer


def main():
    local = sys.argv[1] == "--local"
    if local:
        del sys.argv[1]
    port, bucket = int(sys.argv[1]), sys.argv[2]
    server = ThreadedMotoServer(ip_address="0.0.0.0" if local else "127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    # Authentication is off until reset-auth below, so the set-up may use any credentials.
    session = boto3.session.Session(aws_access_key_id="setup", aws_secret_access_key="setup", region_name="us-east-1")
    session.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
    if local:
        print("ready", flush=True)
        threading.Event().wait()  # until the container stops
    iam = session.client("iam", endpoint_url=endpoint)
    iam.create_user(UserName="media")
    iam.put_user_policy(UserName="media", PolicyName="media", PolicyDocument=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
    }))
    key = iam.create_access_key(UserName="media")["AccessKey"]
    # From now on every request must be signed by a known key with its secret.
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=b"0", method="POST",
                                                  headers={"Content-Type": "text/plain"})).read()
    print("ready", key["AccessKeyId"], key["SecretAccessKey"], flush=True)
    sys.stdin.read()
    server.stop()


if __name__ == "__main__":
    main()
