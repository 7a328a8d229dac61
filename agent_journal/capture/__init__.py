"""Pure capture layer: strict JSON, secret redaction and agent payload normalisation.

Invariant: nothing in this package performs I/O, touches SQLite or imports the rest of
agent_journal (but core/cjson.py, json's own C decoder without the cost of importing json,
and core/tools.py, the tool vocabulary capture/tool_vocabulary.py maps each agent's names
into: leaves that import nothing); it only turns text into plain, redacted dicts, so the
hook path can import it cheaply and every function here can be tested without a journal.
"""
