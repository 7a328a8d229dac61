"""The built-in redaction rules: each secret's name and the exact shape it is matched by,
with the literal prefixes that may start a match (its triggers).

Invariant: data, not mechanism (capture/redact.py applies them): a rule matches a secret
only by its own shape (a vendor prefix, a PEM armour line, a URL's password, an
Authorization header, or a secret's own name followed by a value of that secret's exact
shape); rule names are written into stored text, so they never change.
"""

from __future__ import annotations


def _lit(prefix: str, width: int) -> str:
    # For the prefixes an ordinary word or identifier can end in (`task-`, `network_`,
    # `surveyJ`): preceded by a token character, such a prefix is the middle of a longer
    # identifier, not the start of a key. A literal first keeps the regex engine on its fast
    # literal scan; the boundary check comes after it as a lookbehind, because a leading
    # lookbehind makes every position a candidate (measured: 30x slower on transcript text).
    # Every other vendor prefix is a key wherever it starts, glued to a word (`keyghp_...`)
    # or to an escape (`\\nghp_...`) as much as after a blank. These too count after an
    # escaped line break or tab (`\\nsk-proj-...`, in JSON text inside a JSON string), whose
    # `n` is no word's end.
    return f"{prefix}(?:(?<![A-Za-z0-9_-].{{{width}}})|(?<=\\\\[nrt].{{{width}}}))"


_TAIL = r"(?![A-Za-z0-9_-])"

# Between a key's name and its value: the name's closing quote (JSON, YAML, shell, Python, or
# JSON escaped once more inside a JSON string), then `=`, `:`, `=>` or `:=`, a `>` (an XML
# element, as in an STS answer) or only blanks (`aws configure set NAME VALUE`), then the
# value's opening quote.
_SEP = r"""(?:\\?["'])?(?:[ \t]*(?:=>?|:=?)[ \t]*|[ \t]+|>)(?:\\?["'])?"""


def _keyed(name: str, value: str) -> str:
    # For secrets with no prefix of their own: the key's name is the anchor and `value` the
    # exact shape of the secret, so a placeholder, a variable or a masked value under the
    # same name never matches. Only the value is redacted. `name` starts with a literal, for
    # the same fast scan as _lit's prefixes; what comes before it does not matter.
    return f"{name}{_SEP}(?P<secret>{value})"


_AWS_SECRET = r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])"
# Real session tokens run to hundreds of base64 characters: a minimum of 100 keeps uuids,
# hashes and short values under a `"Token"` key.
_AWS_SESSION = r"[A-Za-z0-9/+]{100,}={0,2}"
# In a presigned URL's query the same token is URL-encoded (X-Amz-Security-Token=...%2F...).
_AWS_SESSION_URL = r"(?:[A-Za-z0-9/+]|%2[BbFf]){100,}(?:=|%3[Dd]){0,2}"
_TWILIO_KEY = r"SK[0-9a-fA-F]{32}(?![A-Za-z0-9])"
# An API key's secret: 32 letters and digits.
_TWILIO_SECRET = r"[A-Za-z0-9]{32}(?![A-Za-z0-9_+/=-])"
_HEX32 = r"[0-9a-fA-F]{32}(?![A-Za-z0-9])"
# A storage or Cosmos DB account key is 64 bytes: 86 base64 characters and `==`. The same
# shape is a SHA-512 digest in base64 (`"integrity": "sha512-..."`), so only a key's name
# anchors it.
_AZURE_KEY = r"[A-Za-z0-9+/]{86}==(?![A-Za-z0-9+/=])"
# A WireGuard (Curve25519) private key: 32 bytes, 43 base64 characters and `=`.
_WG_KEY = r"[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=(?![A-Za-z0-9+/=])"
# What stands for a password in a URL without being one: a shell or template variable
# (`${DB_PASSWORD}`, `$PASS`, `{{ pw }}` without blanks, `%s`, `%(password)s`) or a mask
# (`***`, `...`), as printed by SQLAlchemy and most loggers.
_URL_PLACEHOLDER = (
    r"(?:\$\{[^\s{}@]{0,100}\}|\$\([^\s()@]{0,100}\)|\$[A-Za-z_][A-Za-z0-9_]*|\{\{[^\s@{}]{0,64}\}\}"
    r"|%(?:\([A-Za-z_]+\))?s|\*+|\.\.\.|\u2026)"
)

# (name, pattern), applied in this order, each to the output of the one before. A name may
# appear more than once (one pattern per literal prefix). A pattern with a group named "secret"
# keeps the rest of its match (the header word, the URL's user and host) and redacts only that
# group; any other pattern is replaced whole. Rule names are written into stored text, so they
# are part of the format: do not rename them.
BUILTIN_RULES: tuple[tuple[str, str], ...] = (
    (
        "private-key",
        # Through the END line. A block cut off before END (output truncated by `head` or by
        # the agent) runs to the next blank line, literal or JSON-escaped, or to the end of
        # the text, so no part of the key body survives. The search for END stops at the next
        # BEGIN: without that, every BEGIN would rescan to the end of the text, and a few
        # thousand BEGIN lines in one tool output would take minutes.
        r"-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----"
        r"(?:(?:[^-]|-(?!----BEGIN))*?-----END[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----"
        r"|[\s\S]*?(?=\r?\n[ \t]*\r?\n|\\n\\n|\Z))",
    ),
    (
        "url-password",
        # Runs before the token rules so that a token used as the URL's user is still caught
        # by its own rule afterwards. The last @ before the path ends the userinfo, as in
        # browsers, so a password holding a raw @ is covered too. Quotes, brackets and
        # backslashes end it, so JSON such as "http://host:3000","a@b" is not a password.
        r"://(?<=[A-Za-z0-9+.-]://)[^\s:/?#@\"'`<>\\\[\]]*"
        r":(?P<secret>(?!" + _URL_PLACEHOLDER + r"@)[^\s/?#\"'`<>\\\[\]]+)@",
    ),
    (
        # A password as a URL's query parameter (JDBC and MySQL URLs, `?password=`), or in a
        # JDBC or ADO.NET `;password=`: only after ?, &, ; (`&amp;` too) or Go's JSON \u0026.
        "url-password",
        r"(?:assword|ASSWORD)=(?:(?<=[?&;][Pp]assword=)|(?<=[?&;]PASSWORD=)"
        r"|(?<=u0026[Pp]assword=))"
        r"(?P<secret>(?!" + _URL_PLACEHOLDER + r"(?![^\s&;#\"'`<>\\\[\]]))"
        r"[^\s&;#\"'`<>\\\[\]]+)",
    ),
    (
        "slack-webhook",
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9_/-]{8,})",
    ),
    # RFC 6750 b64token of at least 16 characters, so prose such as "bearer authentication"
    # is left alone; real bearer tokens are far longer. The scheme word is matched in the
    # spellings that occur (Bearer, bearer, BEARER), starting from a literal for speed.
    # Keyed rules run before the prefix rules: their values are base64, whose + and / do not
    # end a token for those rules, so one of them could take a piece out of the middle of a
    # value and leave the rest for no rule to match. One pattern per spelling of the name, so
    # that each starts with a literal.
    #
    # An AWS secret key is exactly 40 base64 characters. The name may carry any prefix (AWS_,
    # TF_VAR_aws_, rclone's bare `secret_access_key`): the value's exact shape makes it AWS's.
    # The shorter `secret_key` is Terraform's and s3cmd's, `AWS_SECRET_KEY` the Java SDK's,
    # `"SecretKey"` the .NET configuration's.
    ("aws-secret-key", _keyed("secret_(?:access_)?key", _AWS_SECRET)),
    ("aws-secret-key", _keyed("SECRET_(?:ACCESS_)?KEY", _AWS_SECRET)),
    ("aws-secret-key", _keyed("ecret(?:Access)?Key", _AWS_SECRET)),
    # The names AWS's tools give a session token: AWS_SECURITY_TOKEN is boto's older one, still
    # set by aws-vault; `"Token"` is the instance and container metadata endpoints' JSON.
    ("aws-session-token", _keyed("aws_se(?:ssion|curity)_token", _AWS_SESSION)),
    ("aws-session-token", _keyed("AWS_SE(?:SSION|CURITY)_TOKEN", _AWS_SESSION)),
    ("aws-session-token", _keyed("essionToken", _AWS_SESSION)),
    ("aws-session-token", _keyed('"Token', _AWS_SESSION)),
    # A presigned URL's query parameter, or the request header of the same name.
    ("aws-session-token", _keyed("-(?:Amz-Security-Token|amz-security-token)", _AWS_SESSION_URL)),
    # A Twilio API key sid (SK and 32 hex) is redacted only under an API key's name (Twilio's
    # TWILIO_API_KEY, its CLI config's apiKey, api_key_sid): bare, the same shape could be
    # anything's.
    ("twilio-api-key", _keyed("api_key(?:_sid)?", _TWILIO_KEY)),
    ("twilio-api-key", _keyed("API_KEY(?:_SID)?", _TWILIO_KEY)),
    ("twilio-api-key", _keyed("piKey(?:Sid)?", _TWILIO_KEY)),
    # The key's secret, 32 letters and digits, under the names Twilio's docs, helper libraries
    # and CLI give it (TWILIO_API_SECRET, api_secret, apiSecret; API_KEY_SECRET too) ...
    ("twilio-api-key", _keyed("api[_-](?:key[_-])?secret", _TWILIO_SECRET)),
    ("twilio-api-key", _keyed("API_(?:KEY_)?SECRET", _TWILIO_SECRET)),
    ("twilio-api-key", _keyed("pi(?:Key)?Secret", _TWILIO_SECRET)),
    # ... or right after the key's sid: `curl -u SK...:secret`, `Client("SK...", "secret")`,
    # and the JSON Twilio answers a key's creation with ("sid" first, "secret" last).
    (
        "twilio-api-key",
        r"SK[0-9a-fA-F]{32}(?::|\\?[\"'][ \t]*,[ \t]*\\?[\"']"
        r"|\\?\"[^{}]{0,400}?\\?\"secret\\?\"[ \t]*:[ \t]*\\?\")(?P<secret>" + _TWILIO_SECRET + ")",
    ),
    # The account's auth token is 32 hex, under the names Twilio's docs and quickstarts give it
    # (TWILIO_AUTH_TOKEN, auth_token, authToken), or after the account sid, as in the docs'
    # `curl -u AC...:token` and `Client("AC...", "token")`.
    ("twilio-auth-token", _keyed("AUTH_TOKEN", _HEX32)),
    ("twilio-auth-token", _keyed("auth_token", _HEX32)),
    ("twilio-auth-token", _keyed("uthToken", _HEX32)),
    (
        "twilio-auth-token",
        r"AC[0-9a-fA-F]{32}(?::|\\?[\"'][ \t]*,[ \t]*\\?[\"'])(?P<secret>" + _HEX32 + ")",
    ),
    # A connection string's account key (Storage, Cosmos DB): 64 bytes, 88 base64 characters.
    ("azure-storage-key", r"AccountKey=(?P<secret>[A-Za-z0-9+/]{40,}={0,2})"),
    # Under a key's name (AZURE_STORAGE_KEY, account_key=, accountKey, --account-key,
    # primary_access_key, Cosmos DB's primaryMasterKey), in its exact shape.
    (
        "azure-storage-key",
        _keyed("(?:STORAGE|ACCOUNT|ACCESS|MASTER|COSMOS(?:_?DB)?)_KEY", _AZURE_KEY),
    ),
    (
        "azure-storage-key",
        _keyed("(?:storage|account|access|master|cosmos(?:_?db)?)_key", _AZURE_KEY),
    ),
    ("azure-storage-key", _keyed("(?:torage|ccount|ccess|aster)Key", _AZURE_KEY)),
    ("azure-storage-key", _keyed("ccount-?key", _AZURE_KEY)),
    # `az storage account keys list`: in JSON ("keyName" before "value", as az sorts keys) ...
    (
        "azure-storage-key",
        r"keyName\\?\"[ \t]*:[ \t]*\\?\"key[12]\\?\"[^{}]{0,300}?"
        r"\\?\"value\\?\"[ \t]*:[ \t]*\\?\"(?P<secret>" + _AZURE_KEY + ")",
    ),
    # ... and as a table or TSV row.
    (
        "azure-storage-key",
        r"key[12][ \t]+(?:FULL|Full|READ|Read)[ \t]+(?P<secret>" + _AZURE_KEY + ")",
    ),
    # Private keys that are not PEM: a WireGuard key under its config's name (PrivateKey =,
    # "privateKey", private_key, WIREGUARD_PRIVATE_KEY=), and a PuTTY key file's private
    # lines, up to the line that is not base64 (Private-MAC:).
    ("private-key", _keyed("rivate(?:Key|_key)", _WG_KEY)),
    ("private-key", _keyed("PRIVATE_KEY", _WG_KEY)),
    (
        "private-key",
        r"Private-Lines:[ \t]*[0-9]+(?:\r?\n|\\r?\\n)"
        r"(?P<secret>[A-Za-z0-9+/=]+(?=\r?\n|\\r?\\n|\Z)"
        r"(?:(?:\r?\n|\\r?\\n)[A-Za-z0-9+/=]+(?=\r?\n|\\r?\\n|\Z))*)",
    ),
    (
        # A SAS signature: an HMAC-SHA256 in base64, URL-encoded or not, as a query parameter
        # (after ?, &, &amp; or Go's JSON \u0026) or first in `SharedAccessSignature=sig=`.
        # At least 40 characters, where a real one has 43, so `sig=` in prose is kept.
        "azure-sas-signature",
        r"sig=(?:(?<=[?&;=]sig=)|(?<=u0026sig=))"
        r"(?P<secret>(?:[A-Za-z0-9+/]|%2[BbFf]){40,}(?:=|%3[Dd]){0,2})",
    ),
    (
        "bearer-token",
        r"earer(?<=[Bb]earer)(?<![A-Za-z0-9_].{6})[ \t]+(?P<secret>[A-Za-z0-9._~+/-]{16,}=*)",
    ),
    ("bearer-token", r"BEARER(?<![A-Za-z0-9_].{6})[ \t]+(?P<secret>[A-Za-z0-9._~+/-]{16,}=*)"),
    (
        "basic-auth",
        r"uthorization(?<=[Aa]uthorization)(?<![A-Za-z0-9_].{13})"
        r"(?:\\?[\"'])?[ \t]*[:=][ \t]*(?:\\?[\"'])?[Bb]asic[ \t]+"
        r"(?P<secret>[A-Za-z0-9+/]{8,}={0,2})",
    ),
    ("anthropic-key", _lit("sk-ant-", 7) + r"[A-Za-z0-9_-]{20,250}"),
    # Glued to a word, an Anthropic key is known by its type and version (`api03-`).
    ("anthropic-key", r"sk-ant-[a-z]{2,8}[0-9]{2}-[A-Za-z0-9_-]{20,250}"),
    (
        "openai-key",
        # Project, service-account, admin and user (`sk-None-`) keys carry a type segment and
        # may contain - and _; legacy keys are one run of letters and digits, so hyphenated
        # words never match.
        _lit("sk-", 3)
        + r"(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,250}|[A-Za-z0-9]{32,250})",
    ),
    # Glued to a word (`tokensk-...`), an OpenAI key is known by the mark OpenAI puts in it
    # (`T3BlbkFJ`, "OpenAI" in base64: 20 characters in, on a legacy key; after the type
    # segment, on a project or admin key), or by the service-account segment; a bare `sk-`
    # after a word is `task-`, `disk-`, `risk-`. The mark is looked for only so far in, so
    # a long run of `sk-` costs each start a bounded look.
    ("openai-key", r"sk-(?:[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20,250}"
                   r"|(?:proj|admin|None)-[A-Za-z0-9_-]{0,100}?T3BlbkFJ[A-Za-z0-9_-]{0,250}"
                   r"|svcacct-[A-Za-z0-9_-]{20,250})"),
    # A key id glued to a lowercase word is still one; after a capital or a digit it is part
    # of a longer run of them, which no key id is.
    ("aws-access-key", r"A[KS]IA(?<![A-Z0-9].{4})[A-Z0-9]{16}(?![A-Za-z0-9])"),
    ("github-token", r"gh[pousr]_[A-Za-z0-9]{36,251}"),
    ("github-token", r"github_pat_[A-Za-z0-9_]{22,244}"),
    ("gitlab-token", r"glpat-[A-Za-z0-9_.-]{20,250}"),
    (
        "slack-token",
        # Slack's published shapes: the type letter, then one to three numeric ids (team, bot
        # or user; a rotating or refresh token's is a version digit), then the secret part. The
        # ids being digits is what tells a token from a name such as `xoxo-valentines.png`.
        r"xox(?:[abeoprs]|e\.xox[bp])-(?:[0-9]+-)+[A-Za-z0-9]{16,250}",
    ),
    # An app-level token: version, app id, a numeric id, then the secret part.
    ("slack-token", r"xapp-[0-9]+-[A-Z0-9]{6,32}-[0-9]{6,}-[A-Za-z0-9]{32,250}"),
    # An app's signing secret and client secret: 32 hex, under the names Slack's docs and Bolt
    # give them (SLACK_SIGNING_SECRET, signing_secret, signingSecret, SLACK_CLIENT_SECRET).
    ("slack-token", _keyed("(?:SIGNING|SLACK_CLIENT)_SECRET", _HEX32)),
    ("slack-token", _keyed("signing_secret", _HEX32)),
    ("slack-token", _keyed("igningSecret", _HEX32)),
    ("stripe-key", _lit("sk_", 3) + r"(?:live|test)_[A-Za-z0-9]{16,247}"),
    ("stripe-key", _lit("rk_", 3) + r"(?:live|test)_[A-Za-z0-9]{16,247}"),
    ("stripe-webhook-secret", r"whsec_[A-Za-z0-9+/=]{24,250}"),
    ("google-api-key", r"AIza[0-9A-Za-z_-]{35}" + _TAIL),
    ("google-oauth-secret", r"GOCSPX-[A-Za-z0-9_-]{28}" + _TAIL),
    (
        "google-oauth-token",
        # A service account's token holds single dots and ends in a run of them; a dot not
        # followed by token characters ends a sentence, and is kept.
        _lit(r"ya29\.", 5) + r"(?=[A-Za-z0-9_.-]{30})[A-Za-z0-9_-]+(?:\.+[A-Za-z0-9_-]+)*",
    ),
    # A refresh token (application_default_credentials.json, a token endpoint's answer).
    ("google-oauth-token", _lit("1//0", 4) + r"[A-Za-z0-9_-]{40,}"),
    ("huggingface-token", r"hf_[A-Za-z0-9]{34,40}" + _TAIL),
    ("npm-token", r"npm_[A-Za-z0-9]{36}" + _TAIL),
    # Every PyPI token is a macaroon whose serialisation starts with these bytes.
    ("pypi-token", r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}"),
    ("sendgrid-key", r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}" + _TAIL),
    ("jwt", _lit("eyJ", 3) + r"[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
    # An age identity: the prefix, then 58 characters of uppercase bech32.
    ("private-key", r"AGE-SECRET-KEY-1[02-9AC-HJ-NP-Z]{58}(?![A-Za-z0-9])"),
)

RULE_NAMES: tuple[str, ...] = tuple(dict.fromkeys(name for name, _ in BUILTIN_RULES))

# For each built-in rule, in the same order: literals of which every match contains at least
# one. A rule runs (and is compiled) only on text holding one of them: compiling every rule
# costs the hook several milliseconds per process, and most text holds none. Each entry must
# be implied by its pattern (tests/test_redact.py checks every positive both ways).
TRIGGERS: tuple[tuple[str, ...], ...] = (
    ("-----BEGIN",),
    ("://",),
    ("assword=", "ASSWORD="),
    ("hooks.slack.com/",),
    ("secret_",),
    ("SECRET_",),
    ("ecret",),
    ("aws_session_token", "aws_security_token"),
    ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"),
    ("essionToken",),
    ('"Token',),
    ("-Amz-Security-Token", "-amz-security-token"),
    ("api_key",),
    ("API_KEY",),
    ("piKey",),
    ("secret",),
    ("API_",),
    ("Secret",),
    ("SK",),
    ("AUTH_TOKEN",),
    ("auth_token",),
    ("uthToken",),
    ("AC",),
    ("AccountKey=",),
    ("_KEY",),
    ("_key",),
    ("torageKey", "ccountKey", "ccessKey", "asterKey"),
    ("ccount-key", "ccountkey"),
    ("keyName",),
    ("key1", "key2"),
    ("rivateKey", "rivate_key"),
    ("PRIVATE_KEY",),
    ("Private-Lines:",),
    ("sig=",),
    ("earer",),
    ("BEARER",),
    ("uthorization",),
    ("sk-ant-",),
    ("sk-ant-",),
    ("sk-",),
    ("sk-",),
    ("AKIA", "ASIA"),
    ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ("github_pat_",),
    ("glpat-",),
    ("xox",),
    ("xapp-",),
    ("_SECRET",),
    ("signing_secret",),
    ("igningSecret",),
    ("sk_",),
    ("rk_",),
    ("whsec_",),
    ("AIza",),
    ("GOCSPX-",),
    ("ya29.",),
    ("1//0",),
    ("hf_",),
    ("npm_",),
    ("pypi-AgEIcHlwaS5vcmc",),
    ("SG.",),
    ("eyJ",),
    ("AGE-SECRET-KEY-1",),
)
