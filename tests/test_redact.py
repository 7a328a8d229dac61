"""Redaction corpus: every rule's positives and the look-alikes it must never touch.

Fake secrets are assembled at run time (prefix + filler) so that this file holds no literal
that a secret scanner would flag; each one has the exact shape of the real thing.
"""

from __future__ import annotations

import re
import sys
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_journal.capture.redact import (
    BUILTIN_RULES,
    RULE_NAMES,
    Redactor,
    marker,
    redact_text,
    redact_value,
)

UPPER = "FAKEXAMPLE0123456789"
ALNUM = "FakeExample0123456789xyzXYZ"
URLSAFE = ALNUM + "-_"
HEX = "0123456789abcdef"


def fill(n: int, alphabet: str = ALNUM) -> str:
    return (alphabet * (n // len(alphabet) + 1))[:n]


def j(*parts: str) -> str:
    return "".join(parts)


AWS = j("AK", "IA", fill(16, UPPER))
AWS_STS = j("AS", "IA", fill(16, UPPER))
# AWS's documented example secret key, and a second one; exactly 40 base64 characters each.
AWS_SECRET = j("wJalrXUtnFEMI", "/K7MDENG/bPxRfiCY", "EXAMPLEKEY")
AWS_SECRET_2 = j("je7MtGbClwBF", "/2Zp9Utk/h3yCo8nvb", "EXAMPLEKEY")
# An STS session token opens with these bytes; real ones run to several hundred characters.
AWS_SESSION = j("IQoJb3JpZ2luX2Vj", "EXAMPLE", fill(340, ALNUM + "+/"), "==")
# A storage account key is 64 bytes in base64; a SAS signature an HMAC-SHA256 in base64, sent
# URL-encoded or, by some tools, as it is.
AZURE_KEY = j(fill(86, ALNUM + "+/"), "==")
SAS_RAW = j(fill(40, ALNUM + "+/"), "k/+", "=")
SAS_SIG = SAS_RAW.replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")
SAS_QUERY = "sv=2022-11-02&ss=b&srt=co&sp=rl&se=2025-12-31T23:59:59Z&spr=https"
# Twilio sids are two letters and 32 hex: an API key's (SK) is no secret by its shape alone,
# only under an API key's name. An account sid (AC) is an id and is kept.
TWILIO_KEY = j("S", "K", "3f9c", fill(28, HEX))
TWILIO_KEY_2 = j("S", "K", "a07e", fill(28, HEX[::-1]))
TWILIO_ACCOUNT = j("A", "C", fill(32, HEX))
TWILIO_TOKEN = fill(32, "9f8e7d6c5b4a3210")
GH = {p: j("gh", p, "_", fill(36)) for p in "pousr"}
GH_PAT = j("github", "_pat_", fill(22), "_", fill(59))
SLACK = {p: j("xo", "x", p, "-", "1234567890-1234567890123-", fill(24)) for p in "bparsa"}
# Published shapes: a bot token (team and bot ids), a legacy bot token (one id), a user token
# (three ids, 32 hex), a rotating token and its refresh token, and an app-level token.
SLACK_BOT = j("xo", "xb-", "1234567890123-", "1234567890123-", fill(24))
SLACK_BOT_LEGACY = j("xo", "xb-", "17653672481-", fill(24))
SLACK_USER = j("xo", "xp-", "2034823745-", "1234567890-", "1234567890123-", fill(32, HEX))
SLACK_ROTATING = j("xo", "xe.", "xo", "xp-", "1-", fill(163))
SLACK_REFRESH = j("xo", "xe-", "1-", fill(146))
SLACK_APP = j("xa", "pp-", "1-", "A0123ABCDEF-", "1234567890123-", fill(64, HEX))
SLACK_HOOK_PATH = j("T0", fill(8, UPPER), "/B0", fill(8, UPPER), "/", fill(24))
SLACK_HOOK = j("https://hooks.", "slack.com/services/", SLACK_HOOK_PATH)
STRIPE = {
    f"{a}_{b}": j(a, "_", b, "_", fill(24)) for a in ("sk", "rk") for b in ("live", "test")
}
STRIPE_WH = j("wh", "sec_", fill(32))
GOOGLE = j("AI", "za", fill(35, URLSAFE))
GOOGLE_CLIENT_SECRET = j("GOC", "SPX-", fill(28, URLSAFE))
GOOGLE_ACCESS = j("ya", "29.", "a0AfB_by", fill(180, URLSAFE))
# A service account's token holds dots, and ends in a run of them.
GOOGLE_ACCESS_SA = j("ya", "29.", "c.", "c0ASRK0G", fill(120, URLSAFE), ".", fill(40), "......")
OPENAI_LEGACY = j("sk", "-", fill(20), "T3Blbk", "FJ", fill(20))
OPENAI_PROJ = j("sk", "-proj-", fill(64, URLSAFE), "T3Blbk", "FJ", fill(64, URLSAFE))
OPENAI_SVC = j("sk", "-svcacct-", fill(40, URLSAFE))
ANTHROPIC = j("sk", "-ant-", "api03-", fill(93, URLSAFE), "AA")
ANTHROPIC_ADMIN = j("sk", "-ant-", "admin01-", fill(60, URLSAFE))
JWT = j(
    "ey", "JhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.", "eyJzdWIiOiIxMjM0NTY3ODkwIn0.", fill(43, URLSAFE)
)
GITLAB = j("gl", "pat-", fill(20, URLSAFE))
NPM = j("np", "m_", fill(36))
PYPI = j("py", "pi-", "AgEIcHlwaS5vcmc", fill(60, URLSAFE))
HF = j("h", "f_", fill(34))
SENDGRID = j("S", "G.", fill(22, URLSAFE), ".", fill(43, URLSAFE))
OPAQUE = fill(40, ALNUM + "._-")
BASIC = "dXNlcjpwYXNzd29yZA=="


def pem(label: str, body_lines: int = 3) -> str:
    body = "\n".join(fill(64, ALNUM + "+/") for _ in range(body_lines))
    return j("-----BEGIN ", label, "-----\n", body, "\n-----END ", label, "-----")


R = marker
POSITIVES: list[tuple[str, str, str]] = [
    ("aws", f"aws_access_key_id = {AWS}", f"aws_access_key_id = {R('aws-access-key')}"),
    ("aws-sts", f'"AccessKeyId": "{AWS_STS}"', f'"AccessKeyId": "{R("aws-access-key")}"'),
    ("aws-env", f"AWS_ACCESS_KEY_ID={AWS}\n", f"AWS_ACCESS_KEY_ID={R('aws-access-key')}\n"),
    (
        "aws-credentials-file",
        j(
            "$ cat ~/.aws/credentials\n[default]\n",
            f"aws_access_key_id = {AWS}\n",
            f"aws_secret_access_key = {AWS_SECRET}\n\n",
            "[ci]\n",
            f"aws_access_key_id={AWS_STS}\n",
            f"aws_secret_access_key={AWS_SECRET_2}\n",
            f"aws_session_token={AWS_SESSION}\n",
            "region = eu-west-1\n",
        ),
        j(
            "$ cat ~/.aws/credentials\n[default]\n",
            f"aws_access_key_id = {R('aws-access-key')}\n",
            f"aws_secret_access_key = {R('aws-secret-key')}\n\n",
            "[ci]\n",
            f"aws_access_key_id={R('aws-access-key')}\n",
            f"aws_secret_access_key={R('aws-secret-key')}\n",
            f"aws_session_token={R('aws-session-token')}\n",
            "region = eu-west-1\n",
        ),
    ),
    (
        "aws-env-sorted",
        j(
            "$ env | sort\n",
            f"AWS_ACCESS_KEY_ID={AWS_STS}\r\n",
            "AWS_DEFAULT_REGION=us-east-1\r\n",
            f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}\r\n",
            f"AWS_SESSION_TOKEN={AWS_SESSION}\r\n",
            f"AWS_SECURITY_TOKEN={AWS_SESSION}\r\n",
            "HOME=/home/dev\r\n",
        ),
        j(
            "$ env | sort\n",
            f"AWS_ACCESS_KEY_ID={R('aws-access-key')}\r\n",
            "AWS_DEFAULT_REGION=us-east-1\r\n",
            f"AWS_SECRET_ACCESS_KEY={R('aws-secret-key')}\r\n",
            f"AWS_SESSION_TOKEN={R('aws-session-token')}\r\n",
            f"AWS_SECURITY_TOKEN={R('aws-session-token')}\r\n",
            "HOME=/home/dev\r\n",
        ),
    ),
    (
        "aws-dotenv-quoted",
        f"export AWS_SECRET_ACCESS_KEY=\"{AWS_SECRET}\"\nexport AWS_SESSION_TOKEN='{AWS_SESSION}'",
        f"export AWS_SECRET_ACCESS_KEY=\"{R('aws-secret-key')}\"\n"
        f"export AWS_SESSION_TOKEN='{R('aws-session-token')}'",
    ),
    (
        "aws-sts-json",
        j(
            '{\n    "Credentials": {\n',
            f'        "AccessKeyId": "{AWS_STS}",\n',
            f'        "SecretAccessKey": "{AWS_SECRET}",\n',
            f'        "SessionToken": "{AWS_SESSION}",\n',
            '        "Expiration": "2025-05-01T12:00:00+00:00"\n    },\n',
            '    "AssumedRoleUser": {"Arn": "arn:aws:sts::123456789012:assumed-role/ci/s1"}\n}',
        ),
        j(
            '{\n    "Credentials": {\n',
            f'        "AccessKeyId": "{R("aws-access-key")}",\n',
            f'        "SecretAccessKey": "{R("aws-secret-key")}",\n',
            f'        "SessionToken": "{R("aws-session-token")}",\n',
            '        "Expiration": "2025-05-01T12:00:00+00:00"\n    },\n',
            '    "AssumedRoleUser": {"Arn": "arn:aws:sts::123456789012:assumed-role/ci/s1"}\n}',
        ),
    ),
    (
        # curl http://169.254.169.254/latest/meta-data/iam/security-credentials/<role>
        "aws-imds-json",
        f'{{\n  "Code" : "Success",\n  "Type" : "AWS-HMAC",\n  "AccessKeyId" : "{AWS_STS}",\n'
        f'  "SecretAccessKey" : "{AWS_SECRET}",\n  "Token" : "{AWS_SESSION}",\n'
        '  "Expiration" : "2025-05-01T18:00:00Z"\n}',
        f'{{\n  "Code" : "Success",\n  "Type" : "AWS-HMAC",\n'
        f'  "AccessKeyId" : "{R("aws-access-key")}",\n'
        f'  "SecretAccessKey" : "{R("aws-secret-key")}",\n  "Token" : "{R("aws-session-token")}",\n'
        '  "Expiration" : "2025-05-01T18:00:00Z"\n}',
    ),
    (
        "aws-json-config",
        f'{{"profile": "ci", "aws_secret_access_key": "{AWS_SECRET}", '
        f'"aws_session_token": "{AWS_SESSION}", "region": "eu-west-1"}}',
        f'{{"profile": "ci", "aws_secret_access_key": "{R("aws-secret-key")}", '
        f'"aws_session_token": "{R("aws-session-token")}", "region": "eu-west-1"}}',
    ),
    (
        "aws-json-escaped-in-a-string",
        f'{{"stdout": "{{\\"SecretAccessKey\\": \\"{AWS_SECRET}\\"}}"}}',
        f'{{"stdout": "{{\\"SecretAccessKey\\": \\"{R("aws-secret-key")}\\"}}"}}',
    ),
    (
        "aws-sts-xml",
        f"< HTTP/1.1 200 OK\n<Credentials>\n  <SecretAccessKey>{AWS_SECRET}</SecretAccessKey>\n"
        f"  <SessionToken>{AWS_SESSION}</SessionToken>\n</Credentials>",
        f"< HTTP/1.1 200 OK\n<Credentials>\n"
        f"  <SecretAccessKey>{R('aws-secret-key')}</SecretAccessKey>\n"
        f"  <SessionToken>{R('aws-session-token')}</SessionToken>\n</Credentials>",
    ),
    (
        "aws-boto3-kwargs",
        f"boto3.client('s3', aws_access_key_id='{AWS}', aws_secret_access_key='{AWS_SECRET}')",
        f"boto3.client('s3', aws_access_key_id='{R('aws-access-key')}', "
        f"aws_secret_access_key='{R('aws-secret-key')}')",
    ),
    (
        "aws-js-sdk",
        f"credentials: {{ secretAccessKey: '{AWS_SECRET}', sessionToken: \"{AWS_SESSION}\" }}",
        f"credentials: {{ secretAccessKey: '{R('aws-secret-key')}', "
        f"sessionToken: \"{R('aws-session-token')}\" }}",
    ),
    (
        "aws-configure-set",
        f"$ aws configure set aws_secret_access_key {AWS_SECRET} --profile ci",
        f"$ aws configure set aws_secret_access_key {R('aws-secret-key')} --profile ci",
    ),
    (
        "aws-yaml",
        f"aws:\n  secret_access_key: {AWS_SECRET}\n  bucket: assets",
        f"aws:\n  secret_access_key: {R('aws-secret-key')}\n  bucket: assets",
    ),
    (
        "azure-connection-string-json",
        j(
            "$ az storage account show-connection-string -n devstore\n",
            '{\n  "connectionString": "DefaultEndpointsProtocol=https;EndpointSuffix=',
            f'core.windows.net;AccountName=devstore;AccountKey={AZURE_KEY};',
            'BlobEndpoint=https://devstore.blob.core.windows.net/"\n}',
        ),
        j(
            "$ az storage account show-connection-string -n devstore\n",
            '{\n  "connectionString": "DefaultEndpointsProtocol=https;EndpointSuffix=',
            f'core.windows.net;AccountName=devstore;AccountKey={R("azure-storage-key")};',
            'BlobEndpoint=https://devstore.blob.core.windows.net/"\n}',
        ),
    ),
    (
        "azure-connection-string-env",
        f'AZURE_STORAGE_CONNECTION_STRING="DefaultEndpointsProtocol=https;AccountName=devstore;'
        f'AccountKey={AZURE_KEY}"\n',
        f'AZURE_STORAGE_CONNECTION_STRING="DefaultEndpointsProtocol=https;AccountName=devstore;'
        f'AccountKey={R("azure-storage-key")}"\n',
    ),
    (
        "azure-sas-curl",
        j(
            f'$ curl -v "https://devstore.blob.core.windows.net/up/a.pdf?{SAS_QUERY}&sig={SAS_SIG}"\n',
            "*   Trying 20.60.0.1:443...\n",
            f"> GET /up/a.pdf?{SAS_QUERY}&sig={SAS_SIG} HTTP/1.1\n",
            "> Host: devstore.blob.core.windows.net\n",
        ),
        j(
            f'$ curl -v "https://devstore.blob.core.windows.net/up/a.pdf?{SAS_QUERY}'
            f'&sig={R("azure-sas-signature")}"\n',
            "*   Trying 20.60.0.1:443...\n",
            f"> GET /up/a.pdf?{SAS_QUERY}&sig={R('azure-sas-signature')} HTTP/1.1\n",
            "> Host: devstore.blob.core.windows.net\n",
        ),
    ),
    (
        "azure-sas-connection-string",
        f"BlobEndpoint=https://devstore.blob.core.windows.net/;SharedAccessSignature={SAS_QUERY}"
        f"&sig={SAS_SIG}",
        f"BlobEndpoint=https://devstore.blob.core.windows.net/;SharedAccessSignature={SAS_QUERY}"
        f"&sig={R('azure-sas-signature')}",
    ),
    (
        "azure-sas-signature-first",
        f"SharedAccessSignature=sig={SAS_SIG}&{SAS_QUERY}",
        f"SharedAccessSignature=sig={R('azure-sas-signature')}&{SAS_QUERY}",
    ),
    (
        "azure-sas-service-bus",
        f"SharedAccessSignature sr=https%3A%2F%2Fns.servicebus.windows.net%2Fq&sig={SAS_SIG}"
        "&se=1735689600&skn=RootManageSharedAccessKey",
        f"SharedAccessSignature sr=https%3A%2F%2Fns.servicebus.windows.net%2Fq"
        f"&sig={R('azure-sas-signature')}&se=1735689600&skn=RootManageSharedAccessKey",
    ),
    (
        "azure-sas-generate-tsv",
        f"$ az storage container generate-sas -n up -o tsv\nse=2025-01-01&sp=r&sv=2022-11-02"
        f"&sr=c&sig={SAS_RAW}\n",
        f"$ az storage container generate-sas -n up -o tsv\nse=2025-01-01&sp=r&sv=2022-11-02"
        f"&sr=c&sig={R('azure-sas-signature')}\n",
    ),
    (
        # Go's JSON encoder writes & as \u0026 (terraform output -json).
        "azure-sas-go-json",
        f'{{"sas_url": {{"value": "https://devstore.blob.core.windows.net/up?sv=2022-11-02'
        f'\\u0026sig={SAS_SIG}"}}}}',
        f'{{"sas_url": {{"value": "https://devstore.blob.core.windows.net/up?sv=2022-11-02'
        f'\\u0026sig={R("azure-sas-signature")}"}}}}',
    ),
    (
        "azure-sas-html",
        f'<a href="https://devstore.blob.core.windows.net/up/a.pdf?sv=2022-11-02&amp;sig={SAS_SIG}'
        '">a.pdf</a>',
        f'<a href="https://devstore.blob.core.windows.net/up/a.pdf?sv=2022-11-02'
        f'&amp;sig={R("azure-sas-signature")}">a.pdf</a>',
    ),
    (
        "twilio-env",
        j(
            "$ cat .env\n",
            f"TWILIO_ACCOUNT_SID={TWILIO_ACCOUNT}\n",
            f"TWILIO_API_KEY={TWILIO_KEY}\n",
            f"TWILIO_AUTH_TOKEN={TWILIO_TOKEN}\n",
            "TWILIO_PHONE_NUMBER=+15005550006\n",
        ),
        j(
            "$ cat .env\n",
            f"TWILIO_ACCOUNT_SID={TWILIO_ACCOUNT}\n",
            f"TWILIO_API_KEY={R('twilio-api-key')}\n",
            f"TWILIO_AUTH_TOKEN={R('twilio-auth-token')}\n",
            "TWILIO_PHONE_NUMBER=+15005550006\n",
        ),
    ),
    (
        "twilio-json",
        f'{{"account_sid": "{TWILIO_ACCOUNT}", "api_key_sid": "{TWILIO_KEY}", "region": "ie1"}}',
        f'{{"account_sid": "{TWILIO_ACCOUNT}", "api_key_sid": "{R("twilio-api-key")}", '
        '"region": "ie1"}',
    ),
    (
        "twilio-cli-config",
        j(
            "$ cat ~/.twilio-cli/config.json\n",
            f'{{"profiles": {{"dev": {{"accountSid": "{TWILIO_ACCOUNT}", ',
            f'"apiKey": "{TWILIO_KEY_2}"}}}}}}',
        ),
        j(
            "$ cat ~/.twilio-cli/config.json\n",
            f'{{"profiles": {{"dev": {{"accountSid": "{TWILIO_ACCOUNT}", ',
            f'"apiKey": "{R("twilio-api-key")}"}}}}}}',
        ),
    ),
    (
        "twilio-export",
        f"export TWILIO_API_KEY_SID='{TWILIO_KEY}'; export TWILIO_AUTH_TOKEN=\"{TWILIO_TOKEN}\"",
        f"export TWILIO_API_KEY_SID='{R('twilio-api-key')}'; "
        f"export TWILIO_AUTH_TOKEN=\"{R('twilio-auth-token')}\"",
    ),
    *[(f"github-{p}", f"token {GH[p]} end", f"token {R('github-token')} end") for p in "pousr"],
    ("github-pat", f"GH_TOKEN={GH_PAT}", f"GH_TOKEN={R('github-token')}"),
    (
        "github-header",
        f"Authorization: token {GH['p']}",
        f"Authorization: token {R('github-token')}",
    ),
    *[(f"slack-{p}", f"slack {SLACK[p]}.", f"slack {R('slack-token')}.") for p in "bparsa"],
    (
        "slack-env",
        j(
            "$ cat .env\n",
            f"SLACK_BOT_TOKEN={SLACK_BOT}\n",
            f"SLACK_APP_TOKEN={SLACK_APP}\n",
            "SLACK_SIGNING_SECRET_FILE=/run/secrets/slack\n",
        ),
        j(
            "$ cat .env\n",
            f"SLACK_BOT_TOKEN={R('slack-token')}\n",
            f"SLACK_APP_TOKEN={R('slack-token')}\n",
            "SLACK_SIGNING_SECRET_FILE=/run/secrets/slack\n",
        ),
    ),
    (
        "slack-json",
        f'{{"ok": true, "access_token": "{SLACK_USER}", "refresh_token": "{SLACK_REFRESH}"}}',
        f'{{"ok": true, "access_token": "{R("slack-token")}", '
        f'"refresh_token": "{R("slack-token")}"}}',
    ),
    ("slack-legacy-bot", f"token = '{SLACK_BOT_LEGACY}'", f"token = '{R('slack-token')}'"),
    ("slack-rotating", f"-H 'Authorization: {SLACK_ROTATING}'",
     f"-H 'Authorization: {R('slack-token')}'"),
    (
        "slack-app-socket-mode",
        f"SocketModeHandler(app, '{SLACK_APP}').start()",
        f"SocketModeHandler(app, '{R('slack-token')}').start()",
    ),
    (
        "slack-webhook",
        f"curl -X POST {SLACK_HOOK} -d x",
        f"curl -X POST https://hooks.slack.com/services/{R('slack-webhook')} -d x",
    ),
    *[(f"stripe-{k}", f"key={v};", f"key={R('stripe-key')};") for k, v in STRIPE.items()],
    ("stripe-webhook", f"WHSEC={STRIPE_WH}", f"WHSEC={R('stripe-webhook-secret')}"),
    ("google", f"?key={GOOGLE}&q=1", f"?key={R('google-api-key')}&q=1"),
    (
        "google-client-secret-json",
        j(
            "$ cat client_secret.json\n",
            '{"installed":{"client_id":"123456789012-abc.apps.googleusercontent.com",',
            f'"project_id":"demo","client_secret":"{GOOGLE_CLIENT_SECRET}",',
            '"redirect_uris":["http://localhost"]}}',
        ),
        j(
            "$ cat client_secret.json\n",
            '{"installed":{"client_id":"123456789012-abc.apps.googleusercontent.com",',
            f'"project_id":"demo","client_secret":"{R("google-oauth-secret")}",',
            '"redirect_uris":["http://localhost"]}}',
        ),
    ),
    (
        "google-client-secret-env",
        f"GOOGLE_CLIENT_ID=1234-abc.apps.googleusercontent.com\nGOOGLE_CLIENT_SECRET="
        f"{GOOGLE_CLIENT_SECRET}\n",
        f"GOOGLE_CLIENT_ID=1234-abc.apps.googleusercontent.com\nGOOGLE_CLIENT_SECRET="
        f"{R('google-oauth-secret')}\n",
    ),
    (
        "google-print-access-token",
        f"$ gcloud auth print-access-token\n{GOOGLE_ACCESS}\n$ ",
        f"$ gcloud auth print-access-token\n{R('google-oauth-token')}\n$ ",
    ),
    (
        "google-token-json",
        f'{{"access_token": "{GOOGLE_ACCESS}", "expires_in": 3599, "token_type": "Bearer"}}',
        f'{{"access_token": "{R("google-oauth-token")}", "expires_in": 3599, '
        '"token_type": "Bearer"}',
    ),
    (
        "google-token-query",
        f"GET /drive/v3/files?access_token={GOOGLE_ACCESS}&alt=json HTTP/1.1",
        f"GET /drive/v3/files?access_token={R('google-oauth-token')}&alt=json HTTP/1.1",
    ),
    (
        "google-service-account-token",
        f"token: {GOOGLE_ACCESS_SA}\nexpiry: 2025-05-01T12:00:00Z",
        f"token: {R('google-oauth-token')}......\nexpiry: 2025-05-01T12:00:00Z",
    ),
    ("openai-legacy", f"OPENAI_API_KEY={OPENAI_LEGACY}", f"OPENAI_API_KEY={R('openai-key')}"),
    ("openai-proj", f"'{OPENAI_PROJ}'", f"'{R('openai-key')}'"),
    ("openai-svcacct", f"{OPENAI_SVC}", R("openai-key")),
    ("anthropic", f"x-api-key: {ANTHROPIC}", f"x-api-key: {R('anthropic-key')}"),
    ("anthropic-admin", f"[{ANTHROPIC_ADMIN}]", f"[{R('anthropic-key')}]"),
    ("jwt", f"id_token={JWT}", f"id_token={R('jwt')}"),
    ("gitlab", f"PRIVATE-TOKEN: {GITLAB}", f"PRIVATE-TOKEN: {R('gitlab-token')}"),
    ("npm", f"//registry/:_authToken={NPM}", f"//registry/:_authToken={R('npm-token')}"),
    ("pypi", f"password = {PYPI}", f"password = {R('pypi-token')}"),
    ("huggingface", f"HF_TOKEN={HF}", f"HF_TOKEN={R('huggingface-token')}"),
    ("sendgrid", f"SENDGRID_API_KEY={SENDGRID}", f"SENDGRID_API_KEY={R('sendgrid-key')}"),
    ("pem-rsa", f"key:\n{pem('RSA PRIVATE KEY')}\ndone", f"key:\n{R('private-key')}\ndone"),
    ("pem-pkcs8", pem("PRIVATE KEY"), R("private-key")),
    ("pem-openssh", pem("OPENSSH PRIVATE KEY"), R("private-key")),
    ("pem-ec", pem("EC PRIVATE KEY", 1), R("private-key")),
    ("pem-encrypted", pem("ENCRYPTED PRIVATE KEY"), R("private-key")),
    ("pem-pgp", pem("PGP PRIVATE KEY BLOCK"), R("private-key")),
    (
        "pem-json-escaped",
        '{"private_key": "' + pem("PRIVATE KEY").replace("\n", "\\n") + '\\n", "x": 1}',
        '{"private_key": "' + R("private-key") + '\\n", "x": 1}',
    ),
    (
        "pem-truncated",
        pem("RSA PRIVATE KEY").rsplit("\n", 1)[0] + "\n\n$ next command",
        R("private-key") + "\n\n$ next command",
    ),
    ("pem-truncated-at-end", pem("OPENSSH PRIVATE KEY").rsplit("\n", 2)[0], R("private-key")),
    (
        "pem-truncated-then-whole",
        pem("EC PRIVATE KEY").rsplit("\n", 1)[0] + "\n\nretry:\n" + pem("EC PRIVATE KEY"),
        R("private-key") + "\n\nretry:\n" + R("private-key"),
    ),
    (
        "pem-legacy-encrypted",
        pem("RSA PRIVATE KEY").replace(
            "-----\n", "-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0A1B2C3D\n\n", 1
        ),
        R("private-key"),
    ),
    (
        "bearer-header",
        f"Authorization: Bearer {OPAQUE}",
        f"Authorization: Bearer {R('bearer-token')}",
    ),
    (
        "bearer-lower",
        f"authorization: bearer {OPAQUE}",
        f"authorization: bearer {R('bearer-token')}",
    ),
    ("bearer-upper", f"BEARER {OPAQUE}", f"BEARER {R('bearer-token')}"),
    (
        "bearer-curl",
        f'curl -H "Authorization: Bearer {OPAQUE}" https://api.example.com',
        f'curl -H "Authorization: Bearer {R("bearer-token")}" https://api.example.com',
    ),
    (
        "bearer-json",
        f'{{"headers": {{"Authorization": "Bearer {OPAQUE}=="}}}}',
        f'{{"headers": {{"Authorization": "Bearer {R("bearer-token")}"}}}}',
    ),
    ("bearer-jwt", f"Bearer {JWT}", f"Bearer {R('bearer-token')}"),
    (
        "basic-header",
        f"Authorization: Basic {BASIC}",
        f"Authorization: Basic {R('basic-auth')}",
    ),
    (
        "basic-json",
        f'{{"authorization": "Basic {BASIC}"}}',
        f'{{"authorization": "Basic {R("basic-auth")}"}}',
    ),
    (
        "url-postgres",
        "postgres://admin:" + "s3cretPass" + "@db.example.com:5432/app",
        f"postgres://admin:{R('url-password')}@db.example.com:5432/app",
    ),
    (
        "url-at-in-password",
        "mysql://root:" + "p@ss:w0rd" + "@10.0.0.5/db?x=1",
        f"mysql://root:{R('url-password')}@10.0.0.5/db?x=1",
    ),
    (
        "url-empty-user",
        "redis://:" + "hunter2hunter2" + "@localhost:6379/0",
        f"redis://:{R('url-password')}@localhost:6379/0",
    ),
    (
        "url-srv",
        'MONGO="mongodb+srv://app:' + "Zx9-Qq" + '@cluster0.example.net/test"',
        f'MONGO="mongodb+srv://app:{R("url-password")}@cluster0.example.net/test"',
    ),
    (
        "url-token-user",
        f"git clone https://{GH['p']}:x-oauth-basic@github.com/o/r.git",
        f"git clone https://{R('github-token')}:{R('url-password')}@github.com/o/r.git",
    ),
    # Glued to the word before it, or to an escape in doubly encoded text, a vendor prefix
    # is still a key's start.
    ("github-glued", "key" + GH["p"], f"key{R('github-token')}"),
    ("github-glued-short-word", "my" + GH["p"], f"my{R('github-token')}"),
    ("github-after-escape", f'"A=1\\n{GH["s"]}"', f'"A=1\\n{R("github-token")}"'),
    ("github-pat-glued", "token" + GH_PAT, f"token{R('github-token')}"),
    ("gitlab-glued", "auth" + GITLAB, f"auth{R('gitlab-token')}"),
    ("slack-glued", "bot" + SLACK_BOT, f"bot{R('slack-token')}"),
    ("huggingface-glued", "tok" + HF, f"tok{R('huggingface-token')}"),
    ("aws-glued", "key" + AWS, f"key{R('aws-access-key')}"),
    ("aws-after-underscore", "MY_KEY_" + AWS, f"MY_KEY_{R('aws-access-key')}"),
    ("openai-glued", "token" + OPENAI_LEGACY, f"token{R('openai-key')}"),
    ("openai-proj-glued", "key" + OPENAI_PROJ, f"key{R('openai-key')}"),
    ("openai-svcacct-glued", "x" + OPENAI_SVC, f"x{R('openai-key')}"),
    ("openai-after-escape", f"line\\t{OPENAI_LEGACY}", f"line\\t{R('openai-key')}"),
    ("anthropic-glued", "mykey" + ANTHROPIC, f"mykey{R('anthropic-key')}"),
    ("anthropic-admin-glued", "k" + ANTHROPIC_ADMIN, f"k{R('anthropic-key')}"),
    (
        "several",
        f"{AWS} {GH['s']}\n{ANTHROPIC},{OPENAI_LEGACY}",
        f"{R('aws-access-key')} {R('github-token')}\n{R('anthropic-key')},{R('openai-key')}",
    ),
]

NEGATIVES: list[str] = [
    "550e8400-e29b-41d4-a716-446655440000",
    "9e953218-585f-4692-89df-9e0747a31c68",
    "5ea305f67ff76bfb498a20a174b387c516f23f60",
    "commit 5ea305f67ff76bfb498a20a174b387c516f23f60 (HEAD -> main)",
    "e4756ca746899ebd35c712f725d62734cdfa84d710a79e55139a24228df3e530",
    "sha256:e4756ca746899ebd35c712f725d62734cdfa84d710a79e55139a24228df3e530",
    "xxh3-64:0123456789abcdef",
    "toolu_01ABC123",
    "toolu_01JkXFMdH7P2xBPSqL2NRJ8Y",
    "msg_01JTYeTNdx3Cxj5p84DbzvX8",
    "req_011CUsk2bG5pQhH3KuYc6nQz",
    "agent-a36efb2a1231c41e2",
    "token: ORDER-4471-ZULU",
    "Remember this token: ORDER-4471-ZULU.",
    "password: see vault",
    "PASSWORD=hunter2",
    "api_key = changeme",
    # An AWS secret key is exactly 40 base64 characters and a session token far longer: names
    # with placeholders, variables, masked or short values are kept.
    "aws_secret_access_key = changeme",
    "AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY",
    "AWS_SECRET_ACCESS_KEY=<your-secret-access-key>",
    '"SecretAccessKey": "****************************************"',
    "AWS_SECRET_ACCESS_KEY_FILE=/run/secrets/aws_secret_access_key",
    "aws configure get aws_secret_access_key --profile ci",
    "AWS_SESSION_TOKEN=",
    "AWS_SESSION_TOKEN=your-session-token",
    '"SessionToken": "' + fill(60) + '"',
    '{"Token": "550e8400-e29b-41d4-a716-446655440000", "Code": "Success"}',
    "secret_key_base = 5ea305f67ff76bfb498a20a174b387c516f23f60",
    # A SAS signature is a query parameter at least 40 characters long.
    "The sig= parameter carries the signature; see ?sig=abc and &sig=.",
    "https://cdn.example.com/img.png?w=64&sig=a1b2c3d4e5f6",
    "sig=" + fill(44, ALNUM + "+/"),
    "gpg --verify --sig=" + fill(44),
    "AccountKey=<your-account-key>;EndpointSuffix=core.windows.net",
    "AccountKey=$AZURE_STORAGE_KEY",
    "DefaultEndpointsProtocol=https;AccountName=devstore;AccountKey=;",
    # SK and 32 hex is a Twilio key only under an API key's name.
    TWILIO_KEY,
    f"$ twilio api:core:keys:list\nSID                                 Friendly Name\n"
    f"{TWILIO_KEY}  ci-deploy\n",
    f'{{"sid": "{TWILIO_KEY}", "friendly_name": "ci-deploy"}}',
    f"TWILIO_ACCOUNT_SID={TWILIO_ACCOUNT}",
    "TWILIO_API_KEY=SK" + "x" * 32,
    "TWILIO_AUTH_TOKEN=your_auth_token",
    "TWILIO_AUTH_TOKEN=[AuthToken]",
    "api_key = changeme; api_key_id = 550e8400-e29b-41d4-a716-446655440000",
    '"Token" : "' + "e4756ca746899ebd35c712f725d62734cdfa84d710a79e55139a24228df3e530" + '"',
    'secret: "correct horse battery staple"',
    "git@github.com:daaain/online-llm-tokenizer.git",
    "https://github.com/daaain/online-llm-tokenizer",
    "http://localhost:3000/path?x=1#frag",
    "https://user@example.com/",
    "ssh://git@github.com:22/o/r.git",
    "mongodb://localhost:27017/db",
    "postgres://user@host/db",
    "https://example.com:8443/a@b",
    '{"url":"http://localhost:3000","email":"dain@example.com"}',
    "<a href='http://x.example:80'>x@y</a>",
    "mail dain@example.com about it",
    "use bearer authentication",
    "The bearer of this letter is trusted.",
    "Authorization: Bearer $TOKEN",
    "Authorization: Bearer ${API_KEY}",
    "Bearer short",
    "Authorization: Basic",
    "task-" + fill(40),
    "risk-assessment-matrix-for-the-quarterly-review",
    "sk-learn",
    "sk-" + fill(20),
    "a-sk-" + fill(40),
    "disk-" + fill(36),
    "AK" + "IA" + fill(15, UPPER),
    "X" + AWS,
    AWS + "X",
    "gh" + "p_" + fill(20),
    # Words and identifiers that end in a vendor prefix (task-, network_, surveyJ, kenya)
    # are not keys: only a prefix no word ends in is taken glued to the word before it.
    "task-admin-panel-component-for-the-dashboard",
    "task-proj-management-dashboard-v2",
    "risk-ant-colony-optimisation-results",
    "flask_test_clientsessionhandling",
    "network_test_connectivitycheck1",
    "surveyJournalEntries.publishedArticles.statistics",
    "kenya29.population-growth-statistics-report",
    "disk-" + fill(40, HEX),
    "xo" + "xb-123",
    # Slack ids after the prefix are digits: a file name is not a token.
    "xo" + "xo-valentines-card-2024.png",
    "$ ls assets/\nlogo.svg\n" + "xo" + "xo-valentines-card-2024.png\nxoxo-2024-02-14.jpg\n",
    "SLACK_BOT_TOKEN=" + "xo" + "xb-your-bot-token-goes-here",
    "xa" + "pp-1-your-app-level-token",
    "sk" + "_live_" + "short",
    "pk" + "_live_" + fill(24),
    "AI" + "za" + "Short",
    "GOOGLE_CLIENT_SECRET=" + "GOC" + "SPX-test-secret",
    "GOOGLE_CLIENT_SECRET=" + "GOC" + "SPX-xxxxx",
    "ya" + "29.txt",
    "Authorization: Bearer ya29.xxx",
    "pkg-ya29." + fill(40),
    "ey" + "JhbGciOiJIUzI1NiJ9",
    "ey" + "JhbGciOiJIUzI1NiJ9.e30",
    "hf_hub_download(repo_id)",
    "npm_config_cache=/tmp",
    "gl" + "pat-short",
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
    "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
    "C:\\Users\\me\\project",
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk",
    "[REDACTED:aws-access-key]",
    "Authorization: Bearer [REDACTED:bearer-token]",
    "",
]


@pytest.mark.parametrize(("label", "text", "expected"), POSITIVES, ids=[p[0] for p in POSITIVES])
def test_positive(label: str, text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize("text", NEGATIVES)
def test_negative_is_returned_untouched(text: str) -> None:
    assert redact_text(text) is text


def test_every_rule_has_a_positive() -> None:
    found = (re.findall(r"REDACTED:([a-z-]+)", expected) for _, _, expected in POSITIVES)
    covered = {name for names in found for name in names}
    assert covered == set(RULE_NAMES)


def test_rule_names_are_the_documented_set() -> None:
    assert RULE_NAMES == (
        "private-key", "url-password", "slack-webhook", "aws-secret-key", "aws-session-token",
        "twilio-api-key", "twilio-auth-token", "azure-storage-key", "azure-sas-signature",
        "bearer-token", "basic-auth",
        "anthropic-key", "openai-key", "aws-access-key", "github-token", "gitlab-token",
        "slack-token", "stripe-key", "stripe-webhook-secret", "google-api-key",
        "google-oauth-secret", "google-oauth-token",
        "huggingface-token", "npm-token", "pypi-token", "sendgrid-key", "jwt",
    )


def test_anthropic_is_not_reported_as_openai() -> None:
    assert redact_text(ANTHROPIC) == R("anthropic-key")


@pytest.mark.parametrize(("label", "text", "expected"), POSITIVES, ids=[p[0] for p in POSITIVES])
def test_redaction_is_idempotent(label: str, text: str, expected: str) -> None:
    assert redact_text(expected) is expected


SECRETS = [
    AWS, AWS_STS, *GH.values(), GH_PAT, *SLACK.values(), SLACK_BOT, SLACK_BOT_LEGACY, SLACK_USER,
    SLACK_ROTATING, SLACK_REFRESH, SLACK_APP, *STRIPE.values(), STRIPE_WH, GOOGLE,
    GOOGLE_CLIENT_SECRET, GOOGLE_ACCESS, GOOGLE_ACCESS_SA,
    OPENAI_LEGACY, OPENAI_PROJ, OPENAI_SVC, ANTHROPIC, ANTHROPIC_ADMIN, JWT, GITLAB, NPM, PYPI,
    HF, SENDGRID, pem("RSA PRIVATE KEY"),
]
# Surroundings that end a token: the secret must vanish whatever sits around it.
separators = st.text(alphabet=" \t\n\"'=:,;()[]{}<>|", max_size=3)
prose = st.text(alphabet=st.characters(codec="utf-8"), max_size=40)


@given(st.sampled_from(SECRETS), separators, separators, prose, prose)
def test_secret_never_survives_its_surroundings(
    secret: str, left: str, right: str, before: str, after: str
) -> None:
    text = before + " " + left + secret + right + " " + after
    out = redact_text(text)
    assert secret not in out
    assert redact_text(out) == out


# Secrets whose vendor prefix no ordinary word ends in, glued to the word before them (or to
# an escape, as in JSON text inside a string): they must vanish all the same. An access key
# id is glued to a lowercase word only (after capitals it is part of a longer run).
GLUED = [
    AWS, AWS_STS, *GH.values(), GH_PAT, *SLACK.values(), SLACK_BOT, SLACK_BOT_LEGACY,
    SLACK_USER, SLACK_ROTATING, SLACK_REFRESH, SLACK_APP, STRIPE_WH, GOOGLE,
    GOOGLE_CLIENT_SECRET, OPENAI_LEGACY, OPENAI_PROJ, OPENAI_SVC, ANTHROPIC, ANTHROPIC_ADMIN,
    GITLAB, NPM, PYPI, HF, SENDGRID,
]
words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-", min_size=1, max_size=8) | \
    st.sampled_from(["\\n", "\\t", "\\r", "key", "token", "export token"])


@given(st.sampled_from(GLUED), words, separators, prose, prose)
def test_a_secret_glued_to_a_word_never_survives(
    secret: str, word: str, right: str, before: str, after: str
) -> None:
    text = before + " " + word + secret + right + " " + after
    out = redact_text(text)
    assert secret not in out
    assert redact_text(out) == out


# Secrets with no prefix of their own, each under a name that anchors it, and the ways the
# name is joined to the value (in .env, ini, YAML, JSON, Python, XML, argv).
JOINERS = ("=", " = ", ":", ": ", " : ", "='", '="', '": "', '" : "', " ", ">")
KEYED: list[tuple[str, str, tuple[str, ...]]] = [
    ("aws_secret_access_key", AWS_SECRET, JOINERS),
    ("AWS_SECRET_ACCESS_KEY", AWS_SECRET, JOINERS),
    ('"SecretAccessKey', AWS_SECRET, JOINERS),
    ("AWS_SESSION_TOKEN", AWS_SESSION, JOINERS),
    ("aws_security_token", AWS_SESSION, JOINERS),
    ('"SessionToken', AWS_SESSION, JOINERS),
    ('"Token', AWS_SESSION, JOINERS),
    ("TWILIO_API_KEY", TWILIO_KEY, JOINERS),
    ('"api_key_sid', TWILIO_KEY, JOINERS),
    ("apiKey", TWILIO_KEY, JOINERS),
    ("TWILIO_AUTH_TOKEN", TWILIO_TOKEN, JOINERS),
    ("AccountKey", AZURE_KEY, ("=",)),
    ("&sig", SAS_SIG, ("=",)),
    ("?sig", SAS_RAW, ("=",)),
]


@given(st.sampled_from(KEYED), st.data(), separators, separators, prose, prose)
def test_keyed_secret_never_survives_its_surroundings(
    keyed: tuple[str, str, tuple[str, ...]], data: st.DataObject, left: str, right: str,
    before: str, after: str,
) -> None:
    name, secret, joiners = keyed
    joiner = data.draw(st.sampled_from(joiners))
    text = before + " " + left + name + joiner + secret + right + " " + after
    # Only the value must go: prose before the name can make the name part of something else
    # (`Bearer aws_secret_access_key=...` is a bearer token, and redacted as one).
    out = redact_text(text)
    assert secret not in out
    assert redact_text(out) == out


@given(st.text(alphabet="0123456789abcdefABCDEF-: \n/._", max_size=200))
def test_hex_ids_and_paths_are_never_touched(text: str) -> None:
    assert redact_text(text) is text


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"))
def test_tool_use_ids_are_never_touched(suffix: str) -> None:
    for text in ("toolu_01" + suffix, "msg_01" + suffix, "call_" + suffix):
        assert redact_text(text) is text


def test_redact_value_walks_dicts_and_lists_and_keys() -> None:
    value = {
        "command": f"export GH={GH['p']}",
        "nested": [1, None, True, 2.5, {"k": AWS, AWS: "key-named-by-a-secret"}],
        "clean": {"a": "b"},
    }
    out = redact_value(value)
    assert out == {
        "command": f"export GH={R('github-token')}",
        "nested": [
            1, None, True, 2.5,
            {"k": R("aws-access-key"), R("aws-access-key"): "key-named-by-a-secret"},
        ],
        "clean": {"a": "b"},
    }
    # Copy on write: the input is intact and the untouched branch is shared, not copied.
    assert value["command"] == f"export GH={GH['p']}"
    assert value["nested"][4] == {"k": AWS, AWS: "key-named-by-a-secret"}  # type: ignore[index]
    assert out["clean"] is value["clean"]


# A secret used as an object key: a whole key, a key holding a header line, a key holding an
# assignment, each nested the way tool payloads nest them.
SECRET_KEYS = [
    (
        {"tokens": {GH["p"]: {"scopes": ["repo"], "note": "ci"}}},
        {"tokens": {R("github-token"): {"scopes": ["repo"], "note": "ci"}}},
    ),
    (
        {"headers": [{f"Authorization: Bearer {OPAQUE}": True}, {"Accept": "*/*"}]},
        {"headers": [{f"Authorization: Bearer {R('bearer-token')}": True}, {"Accept": "*/*"}]},
    ),
    (
        [{"env": {f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}": "", "HOME=/home/dev": ""}}],
        [{"env": {f"AWS_SECRET_ACCESS_KEY={R('aws-secret-key')}": "", "HOME=/home/dev": ""}}],
    ),
]


@pytest.mark.parametrize(("value", "expected"), SECRET_KEYS, ids=["whole", "header", "env"])
def test_redact_value_redacts_secrets_used_as_keys(value: object, expected: object) -> None:
    out = redact_value(value)
    assert out == expected
    assert redact_value(out) is out
    assert AWS_SECRET not in repr(out) and GH["p"] not in repr(out) and OPAQUE not in repr(out)


def test_a_renamed_key_keeps_its_place_and_shares_its_value() -> None:
    inner = {"scopes": ["repo"]}
    value = {"first": 1, GH["p"]: inner, "last": [2]}
    out = redact_value(value)
    assert list(out) == ["first", R("github-token"), "last"]
    assert out[R("github-token")] is inner
    assert out["last"] is value["last"]
    assert value == {"first": 1, GH["p"]: inner, "last": [2]}


def test_keys_that_redact_alike_are_all_kept() -> None:
    # Merging them would drop entries silently: each later one is told apart by a number,
    # past any key already spelled that way.
    marker_key = R("aws-access-key")
    value = {AWS: 1, AWS_STS: 2, f"{marker_key} (2)": 3, marker_key: 0}
    assert redact_value(value) == {
        f"{marker_key} (3)": 1, f"{marker_key} (4)": 2, f"{marker_key} (2)": 3, marker_key: 0,
    }
    assert redact_value({AWS: 1, AWS_STS: 2}) == {marker_key: 1, f"{marker_key} (2)": 2}


def test_redact_value_renames_keys_in_shared_subtrees_and_leaves_other_keys() -> None:
    shared = {AWS: [GH["s"]]}
    out = redact_value([shared, shared, {1: AWS, None: "x", ("t",): "y"}])
    assert out == [
        {R("aws-access-key"): [R("github-token")]},
        {R("aws-access-key"): [R("github-token")]},
        {1: R("aws-access-key"), None: "x", ("t",): "y"},
    ]
    assert out[0] is out[1]
    assert shared == {AWS: [GH["s"]]}


def test_redact_value_returns_the_same_object_when_clean() -> None:
    value = {"a": ["x", {"b": "toolu_01ABC123"}], "n": 3}
    assert redact_value(value) is value
    assert redact_value("plain") == "plain"
    assert redact_value(42) == 42
    assert redact_value(None) is None


def test_redact_value_handles_nesting_deeper_than_the_recursion_limit() -> None:
    depth = sys.getrecursionlimit() * 3
    value: list[object] = [AWS]
    for _ in range(depth):
        value = [value]
    out = redact_value(value)
    for _ in range(depth):
        out = out[0]
    assert out == [R("aws-access-key")]


def test_redact_value_handles_shared_subtrees() -> None:
    shared = {"k": AWS}
    out = redact_value([shared, shared])
    assert out == [{"k": R("aws-access-key")}] * 2
    assert shared == {"k": AWS}


def test_extra_patterns_redact_whole_match_or_secret_group() -> None:
    redactor = Redactor(
        [
            ("acme-key", r"ACME-[0-9]{6}"),
            ("session-cookie", r"sid=(?P<secret>[a-f0-9]{16})"),
        ]
    )
    text = f"ACME-123456 sid=0123456789abcdef {AWS}"
    assert redactor.redact_text(text) == (
        f"{R('acme-key')} sid={R('session-cookie')} {R('aws-access-key')}"
    )
    assert redactor.redact_value({"t": ["ACME-000000"]}) == {"t": [R("acme-key")]}
    # The shared default redactor is not affected by one built with extras.
    assert redact_text("ACME-123456") == "ACME-123456"


def test_extra_patterns_run_after_builtins() -> None:
    # A user pattern that would match inside a key sees only the builtin's marker.
    redactor = Redactor([("aws-tail", r"EXAMPLE")])
    assert redactor.redact_text(AWS) == R("aws-access-key")


def test_extra_pattern_matching_empty_string_somewhere_adds_nothing() -> None:
    redactor = Redactor([("odd", r"(?<=x)y?")])
    assert redactor.redact_text("xa xy") == f"xa x{R('odd')}"


@pytest.mark.parametrize(
    ("patterns", "message"),
    [
        ([("Bad Name", "x")], "redaction rule name 'Bad Name' must be"),
        ([("", "x")], "redaction rule name '' must be"),
        ([("ok", "(unclosed")], "redaction rule 'ok': invalid regex: missing ), unterminated"),
        ([("ok", "a*")], "redaction rule 'ok': pattern matches the empty string"),
    ],
)
def test_bad_extra_patterns_are_refused(patterns: list[tuple[str, str]], message: str) -> None:
    with pytest.raises(ValueError) as info:
        Redactor(patterns)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_builtin_patterns_all_compile_and_are_named() -> None:
    for name, pattern in BUILTIN_RULES:
        assert re.fullmatch(r"[a-z][a-z-]+", name)
        re.compile(pattern)


PEM_BEGIN = "-----BEGIN " + "PRIVATE KEY-----"
ADVERSARIAL = {
    "pem-begin-and-blank-lines": (PEM_BEGIN + "\n\n") * 10_000,
    "pem-begin-lines": (PEM_BEGIN + "\n") * 10_000,
    "jwt-prefix-run": "ey" + "J" + "eyJ" * 100_000,
    "url-colons": "a://" + "b:" * 150_000,
    "url-ats": "x://u:" + "@" * 300_000,
    "bearer-short-tokens": ("Bearer " + "a" * 15 + " ") * 15_000,
    "authorization-spaces": ("Authorization" + " " * 1000) * 300,
    "keyed-name-blanks": ("SECRET_ACCESS_KEY" + " " * 1000) * 300,
    "keyed-short-values": ('"Token": "' + "A" * 99 + '" ') * 3000,
    "sas-short-signatures": ("&sig=" + "A" * 39 + " ") * 6_000,
    "sas-escapes": "?sig=" + "%2B" * 100_000,
    "account-key-names": "AccountKey=" * 30_000,
    "api-key-names": ("api_key=" + "SK" + "0" * 31 + " ") * 8_000,
    "google-token-dots": "ya" + "29." + "a." * 150_000,
    "google-token-prefix-run": ("ya" + "29.") * 60_000,
    "slack-id-run": "xo" + "xb-" + "1-" * 150_000,
    "slack-prefix-run": ("xo" + "xb-1-") * 50_000,
    "openai-prefix-run": "sk" + "-" + "sk-" * 100_000,
    "openai-project-prefix-run": ("sk" + "-proj-") * 40_000,
    "openai-glued-runs": "x" + ("sk" + "-" + "a" * 40) * 7_000,
}


@pytest.mark.parametrize("label", sorted(ADVERSARIAL))
def test_crafted_output_is_redacted_in_linear_time(label: str) -> None:
    # Tool output is attacker-controlled (cat a file from a hostile repo) and the hook must
    # never stall the agent: ~300 KB of the worst shape each rule has must take milliseconds.
    text = ADVERSARIAL[label]
    started = time.perf_counter()
    redact_text(text)
    assert time.perf_counter() - started < 2.0


# -- the literal prefilter ----------------------------------------------------------------

def _unfiltered(text: str) -> str:
    """Every built-in rule applied regardless of its trigger literals."""
    from agent_journal.capture import redact as module

    out = text
    for rule in module._builtin_rules():
        compiled, replace = rule.compiled()
        out = compiled.sub(replace, out)
    return out


def test_triggers_line_up_with_the_rules() -> None:
    from agent_journal.capture.redact_rules import TRIGGERS as _TRIGGERS

    assert len(_TRIGGERS) == len(BUILTIN_RULES)
    assert all(triggers and all(triggers) for triggers in _TRIGGERS)


def test_every_match_of_a_rule_holds_one_of_its_triggers() -> None:
    from agent_journal.capture.redact_rules import TRIGGERS as _TRIGGERS

    texts = [text for _, text, _ in POSITIVES] + NEGATIVES + [f" {s} " for s in SECRETS]
    matched = 0
    for (name, pattern), triggers in zip(BUILTIN_RULES, _TRIGGERS, strict=True):
        for text in texts:
            for match in re.finditer(pattern, text):
                matched += 1
                assert any(t in match.group() for t in triggers), (name, match.group())
    assert matched >= len(POSITIVES)


@pytest.mark.parametrize(("label", "text", "expected"), POSITIVES, ids=[p[0] for p in POSITIVES])
def test_prefilter_changes_no_result(label: str, text: str, expected: str) -> None:
    assert redact_text(text) == _unfiltered(text) == expected


@given(st.lists(st.sampled_from(SECRETS + NEGATIVES + ["\n", " ", ":", "@", "://"]),
                max_size=8), prose)
def test_prefilter_changes_no_result_on_mixtures(parts: list[str], noise: str) -> None:
    text = noise.join(parts)
    assert redact_text(text) == _unfiltered(text)


# -- the pre-filter over a whole value ------------------------------------------------------

def test_no_trigger_holds_a_line_break_or_a_marker_bracket() -> None:
    # redact_value joins a value's strings with line breaks and looks for triggers once
    # in the join; a rule's marker is what the rules after it see, and its brackets
    # keep any trigger from straddling its edge.
    from agent_journal.capture.redact_rules import TRIGGERS as _TRIGGERS

    assert not any(set(t) & set("\n[]") for triggers in _TRIGGERS for t in triggers)


_leaf = st.sampled_from(SECRETS + NEGATIVES + [marker(n) for n in RULE_NAMES]) | prose
_json_like = st.recursive(
    _leaf | st.integers() | st.none(),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(_leaf, inner, max_size=4),
    max_leaves=12)


@given(_json_like)
def test_value_prefilter_changes_no_result(value: object) -> None:
    # The whole-value pre-filter must give exactly what redacting every string with every
    # rule gives.
    from agent_journal.capture import redact as module

    redactor = module.Redactor()
    if isinstance(value, dict | list):
        expected = module._redact_container(redactor.redact_text, value)
    else:
        expected = redactor.redact_text(value) if isinstance(value, str) else value
    assert redactor.redact_value(value) == expected


def test_value_prefilter_keeps_rules_a_marker_triggers() -> None:
    # A marker written by one rule can hold a later rule's trigger; the rules kept for a
    # value follow from the markers of those kept before them, and from nothing else.
    from agent_journal.capture import redact as module

    redactor = module.Redactor()
    first = module._Rule("names-sk-", "zz+", ("zz",))
    second = module._Rule("openai-key", "sk-[a-z]{4}", ("sk-",))
    third = module._Rule("other", "qq+", ("qq",))
    redactor._rules = [first, second, third]
    assert redactor._rules_for("a zz b") == [first, second]
    assert redactor._rules_for("plain") == []


_ALL_TRIGGERS = [t for triggers in __import__(
    "agent_journal.capture.redact_rules", fromlist=["TRIGGERS"]).TRIGGERS for t in triggers]


@given(st.lists(st.sampled_from(_ALL_TRIGGERS + [t[:-1] for t in _ALL_TRIGGERS]
                                + [t[1:] for t in _ALL_TRIGGERS]) | prose, max_size=6),
       prose)
def test_trigger_scan_finds_exactly_the_texts_holding_a_trigger(parts: list[str],
                                                                 noise: str) -> None:
    from agent_journal.capture import redact as module

    scan = re.compile(module._trigger_scan_pattern())
    text = noise.join(parts)
    assert (scan.search(text) is not None) == any(t in text for t in _ALL_TRIGGERS)


def test_values_past_the_compile_point_are_redacted_alike() -> None:
    # The first values are decided by a search per trigger, the later ones by the
    # compiled scan: both must give what the rules give.
    from agent_journal.capture import redact as module

    redactor = module.Redactor()
    values = [{"k": text, "n": [text]} for text in SECRETS + NEGATIVES]
    values = values * (1 + 2 * module._COMPILE_AFTER // len(values))
    for value in values:
        assert redactor.redact_value(value) == \
            module._redact_container(redactor.redact_text, value)
    assert module._trigger_scan is not None


def test_trigger_scan_finds_each_trigger_and_no_cut_of_one() -> None:
    from agent_journal.capture import redact as module

    scan = re.compile(module._trigger_scan_pattern())
    for trigger in _ALL_TRIGGERS:
        assert scan.search(f"before {trigger} after"), trigger
        for cut in (trigger[:-1], trigger[1:]):
            holds = any(t in cut for t in _ALL_TRIGGERS)
            assert (scan.search(f" {cut} ") is not None) == holds, cut
