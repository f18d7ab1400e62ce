"""Admission traces: the event records servers write, and the strict reader of trace files.

Read `events` (one record per admission event, and the sweep that counts what was in
flight), then `files` (the JSON-lines format, one file per server, read strictly).
"""
