"""A remote in an S3-compatible bucket, through botocore (what boto3, the `s3` extra, is
built on): `s3://bucket/prefix`.

Invariants:
- botocore is imported here only, and only when an s3:// remote is used; without
  it the one line says which extra to install.
- Credentials, region and profile come from the standard AWS chain; nothing
  here reads or stores a secret. The instance-metadata lookup is left to that
  chain too.
- Transient failures (5xx, 429 and throttling codes, dropped connections,
  timeouts) are retried by botocore's `standard` mode (exponential backoff with
  jitter; AWS_MAX_ATTEMPTS, else 5 attempts); what is left is one RemoteError
  line naming the bucket and what failed.
- Objects are created with `If-None-Match: *` and the manifest replaced with
  `If-Match`, so no write here ever replaces bytes it did not read. Whether
  the service enforces them (answers 412 where it must) is found by
  `probe_conditional_writes`, which sync runs before a first push and which
  refuses a service that does not, unless the user opted in. Then (and when
  a service answers NotImplemented) objects get plain writes (their keys are
  their content) and the manifest comparison is re-done by reading the ETag
  just before the write.
"""

from __future__ import annotations

import os
from typing import Any

from agent_journal.core.errors import RemoteError
from agent_journal.storage.files import RunningDigest, open_private_new
from agent_journal.storage.remote import (
    ObjectMissing,
    PreconditionFailed,
    Progress,
    Remote,
    Tops,
)

EXTRA_HINT = "s3:// remotes need boto3: pip install 'agent-journal[s3]'"
_CHUNK = 1 << 20
_NOT_IMPLEMENTED = {"NotImplemented", "501"}
_REFUSED_CONDITION = {"PreconditionFailed", "412", "ConditionalRequestConflict"}
# An etag no object has (S3 etags are quoted hex digests): a write conditional on it
# must be refused.
_NO_SUCH_ETAG = '"00000000000000000000000000000000-0"'


_CREDENTIAL_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                   "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONFIG_FILE",
                   "AWS_SHARED_CREDENTIALS_FILE", "AWS_REGION", "AWS_DEFAULT_REGION")
_clients: dict[Any, Any] = {}
_sessions: dict[Any, Any] = {}


def _session(botocore_session: Any, env: tuple[str | None, ...]) -> Any:
    # A session caches the credentials it resolved: one per credential setting.
    if env not in _sessions:
        _sessions[env] = botocore_session.Session()
    return _sessions[env]


def _boto() -> tuple[Any, Any, Any]:
    """botocore, which boto3 is built on: every call here is a plain client call, so
    boto3's own layer (its resources and s3transfer, about a fifth of the import's
    CPU) is not loaded. The same credential chain, retries and configuration."""
    try:
        import botocore.config
        import botocore.exceptions
        import botocore.session
    except ImportError:
        raise RemoteError(EXTRA_HINT) from None
    return botocore.session, botocore.config, botocore.exceptions


class S3Remote(Remote):
    listing_checks = True  # ListObjectsV2 answers NoSuchBucket, AccessDenied, ... as well

    def __init__(self, url: str, bucket: str, prefix: str, *,
                 endpoint_url: str | None = None) -> None:
        session, config, exceptions = _boto()
        self.url = url
        self.bucket = bucket
        self.prefix = prefix + "/" if prefix else ""
        self._exc = exceptions
        attempts = int(os.environ.get("AWS_MAX_ATTEMPTS") or 5)
        extra: dict[str, str] = {}
        if endpoint_url is not None:
            # Many S3-compatible services refuse the newer streamed trailing
            # checksums; integrity does not depend on them (pull checks every
            # object's size and xxh3 against its manifest).
            if not os.environ.get("AWS_REQUEST_CHECKSUM_CALCULATION"):
                extra["request_checksum_calculation"] = "when_required"
            if not os.environ.get("AWS_RESPONSE_CHECKSUM_VALIDATION"):
                extra["response_checksum_validation"] = "when_required"
        mode = os.environ.get("AWS_RETRY_MODE") or "standard"
        # Clients are costly to build (botocore loads its service models):
        # one per process and setting, and the environment that picks the
        # credentials is part of the key.
        env = tuple(os.environ.get(v) for v in _CREDENTIAL_ENV)
        key = (endpoint_url, attempts, mode, tuple(sorted(extra.items())), env)
        client = _clients.get(key)
        if client is None:
            cfg = config.Config(retries={"mode": mode, "total_max_attempts": attempts},
                                connect_timeout=10, read_timeout=60, **extra)
            try:
                client = _session(session, env).create_client("s3", endpoint_url=endpoint_url,
                                                              config=cfg)
            except exceptions.BotoCoreError as exc:
                raise RemoteError(f"remote {url}: {exc}") from None
            _clients[key] = client
        self.client = client
        self._endpoint = endpoint_url is not None
        self._conditional = True

    # -- errors -------------------------------------------------------------------------

    def _code(self, exc: Any) -> str:
        return str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))

    def _fail(self, what: str, exc: Exception) -> RemoteError:
        ex = self._exc
        if isinstance(exc, ex.NoCredentialsError | ex.PartialCredentialsError):
            return RemoteError(f"remote {self.url}: no AWS credentials found (set "
                               "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)")
        if isinstance(exc, ex.ClientError):
            code = self._code(exc)
            if code in ("NoSuchBucket",):
                return RemoteError(f"remote {self.url}: bucket {self.bucket} does not exist")
            if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied",
                        "403", "ExpiredToken"):
                return RemoteError(f"remote {self.url}: access refused while trying to {what} "
                                   f"({code}); check the AWS credentials")
            message = exc.response.get("Error", {}).get("Message") or code
            tries = exc.response.get("ResponseMetadata", {}).get("RetryAttempts", 0)
            after = f" (after {tries + 1} attempts)" if tries else ""
            return RemoteError(f"remote {self.url}: cannot {what}: {code} {message}{after}")
        text = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        return RemoteError(f"remote {self.url}: cannot {what} (after retries): {text}")

    def _errors(self) -> tuple[type[Exception], ...]:
        return (self._exc.BotoCoreError, self._exc.ClientError)

    # -- the interface ------------------------------------------------------------------

    def check(self) -> None:
        try:
            self.client.head_bucket(Bucket=self.bucket)
        except self._exc.ClientError as exc:
            if self._code(exc) in ("404", "NoSuchBucket", "NotFound"):
                raise RemoteError(f"remote {self.url}: bucket {self.bucket} does not "
                                  "exist") from None
            raise self._fail("reach the bucket", exc) from None
        except self._exc.BotoCoreError as exc:
            raise self._fail("reach the bucket", exc) from None

    def list_keys(self, prefix: str) -> dict[str, int]:
        out: dict[str, int] = {}
        full = self.prefix + prefix
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=full)
            for page in pages:
                for item in page.get("Contents", []):
                    out[item["Key"][len(self.prefix):]] = int(item["Size"])
        except self._errors() as exc:
            raise self._fail(f"list {full}", exc) from None
        return out

    def list_tops(self, prefix: str, delimiter: str) -> Tops:
        full = self.prefix + prefix
        etags: dict[str, str | None] = {}
        rolled: list[str] = []
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=full, Delimiter=delimiter)
            for page in pages:
                for item in page.get("Contents", []):
                    etags[item["Key"][len(self.prefix):]] = str(item["ETag"])
                rolled += [item["Prefix"][len(self.prefix):]
                           for item in page.get("CommonPrefixes", [])]
        except self._exc.ClientError as exc:
            if delimiter != "/" and self._code(exc) in ("InvalidArgument", *_NOT_IMPLEMENTED):
                # A service that takes only '/' rolls up more: what it does not list
                # the caller reads key by key.
                return self.list_tops(prefix, "/")
            raise self._fail(f"list {full}", exc) from None
        except self._exc.BotoCoreError as exc:
            raise self._fail(f"list {full}", exc) from None
        return Tops(etags, rolled)

    def get_bytes(self, key: str, *, if_none_match: str | None = None
                  ) -> tuple[bytes, str] | None:
        args: dict[str, Any] = {"Bucket": self.bucket, "Key": self.prefix + key}
        if if_none_match is not None:
            args["IfNoneMatch"] = if_none_match
        try:
            resp = self.client.get_object(**args)
            return resp["Body"].read(), str(resp["ETag"])
        except self._exc.ClientError as exc:
            code = self._code(exc)
            if code in ("304", "NotModified"):
                return None
            if code in ("NoSuchKey", "404"):
                raise ObjectMissing(f"remote {self.url} has no {key}") from None
            raise self._fail(f"read {key}", exc) from None
        except self._exc.BotoCoreError as exc:
            raise self._fail(f"read {key}", exc) from None

    def download(self, key: str, dest: str, *, progress: Progress = None) -> tuple[int, str]:
        digest = RunningDigest()
        try:
            resp = self.client.get_object(Bucket=self.bucket, Key=self.prefix + key)
            body = resp["Body"]
            with open_private_new(dest) as out:
                while chunk := body.read(_CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    if progress is not None:
                        progress(len(chunk))
        except self._exc.ClientError as exc:
            if self._code(exc) in ("NoSuchKey", "404"):
                raise ObjectMissing(f"remote {self.url} has no {key}") from None
            raise self._fail(f"read {key}", exc) from None
        except self._exc.BotoCoreError as exc:
            raise self._fail(f"read {key}", exc) from None
        return digest.result()

    def put_file(self, key: str, path: str, *, progress: Progress = None) -> bool:
        args: dict[str, Any] = {"Bucket": self.bucket, "Key": self.prefix + key}
        if self._conditional:
            args["IfNoneMatch"] = "*"
        try:
            with open(path, "rb") as fh:
                self.client.put_object(Body=fh, **args)
        except self._exc.ClientError as exc:
            code = self._code(exc)
            if code in _REFUSED_CONDITION:
                return False  # the key is its content: what is there is these bytes
            if code in _NOT_IMPLEMENTED and self._conditional:
                self._conditional = False
                return self.put_file(key, path, progress=progress)
            raise self._fail(f"upload {key}", exc) from None
        except self._exc.BotoCoreError as exc:
            raise self._fail(f"upload {key}", exc) from None
        if progress is not None:
            progress(os.path.getsize(path))
        return True

    def _head_etag(self, key: str) -> str | None:
        try:
            return str(self.client.head_object(Bucket=self.bucket,
                                               Key=self.prefix + key)["ETag"])
        except self._exc.ClientError as exc:
            if self._code(exc) in ("NoSuchKey", "404", "NotFound"):
                return None
            raise self._fail(f"read {key}", exc) from None
        except self._exc.BotoCoreError as exc:
            raise self._fail(f"read {key}", exc) from None

    def put_bytes(self, key: str, data: bytes, *, if_match: str | None) -> str:
        args: dict[str, Any] = {"Bucket": self.bucket, "Key": self.prefix + key, "Body": data,
                                "ContentType": "application/json"}
        if self._conditional:
            if if_match is None:
                args["IfNoneMatch"] = "*"
            else:
                args["IfMatch"] = if_match
        elif self._head_etag(key) != if_match:
            raise PreconditionFailed(f"remote {self.url}: {key} changed while this push ran")
        try:
            return str(self.client.put_object(**args)["ETag"])
        except self._exc.ClientError as exc:
            code = self._code(exc)
            if code in _REFUSED_CONDITION:
                raise PreconditionFailed(f"remote {self.url}: {key} changed while this push "
                                         "ran") from None
            if code in _NOT_IMPLEMENTED and self._conditional:
                self._conditional = False
                return self.put_bytes(key, data, if_match=if_match)
            raise self._fail(f"upload {key}", exc) from None
        except self._exc.BotoCoreError as exc:
            raise self._fail(f"upload {key}", exc) from None

    def probe_conditional_writes(self, key: str) -> str | None:
        full = self.prefix + key
        where = self.url + (f" at {self.client.meta.endpoint_url}" if self._endpoint else "")
        attempts = [("If-None-Match: * of a new key", {"IfNoneMatch": "*"}, True),
                    ("If-None-Match: * of a key that exists", {"IfNoneMatch": "*"}, False),
                    ("If-Match of an etag the key does not have", {"IfMatch": _NO_SUCH_ETAG},
                     False)]
        try:
            for what, condition, allowed in attempts:
                try:
                    self.client.put_object(Bucket=self.bucket, Key=full, Body=b"probe",
                                           **condition)
                except self._exc.ClientError as exc:
                    code = self._code(exc)
                    if code in _REFUSED_CONDITION and not allowed:
                        continue
                    if code in _NOT_IMPLEMENTED:
                        return (f"the server of remote {where} does not implement conditional "
                                f"writes (it answered {code} to a write with {what})")
                    if code in _REFUSED_CONDITION:
                        return (f"the server of remote {where} refused a write with {what} "
                                f"({code})")
                    raise self._fail("write a probe object", exc) from None
                except self._exc.BotoCoreError as exc:
                    raise self._fail("write a probe object", exc) from None
                else:
                    if not allowed:
                        return (f"the server of remote {where} ignores conditional writes: it "
                                f"accepted a write with {what}, which S3 refuses (412)")
        finally:
            try:
                self.client.delete_object(Bucket=self.bucket, Key=full)
            except self._errors():
                pass  # left for the next push's clean-up of the own prefix
        return None

    def without_conditions(self) -> None:
        self._conditional = False

    def delete(self, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self.prefix + key)
        except self._errors() as exc:
            raise self._fail(f"delete {key}", exc) from None

    def versioning(self) -> str | None:
        try:
            status = self.client.get_bucket_versioning(Bucket=self.bucket).get("Status")
        except self._errors() as exc:
            raise self._fail("read the bucket's versioning", exc) from None
        return str(status) if status else None
