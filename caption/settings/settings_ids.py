"""A record's settings_id, and which records of an output are a job's own.

The settings themselves, and why each is in them, are caption/output/fingerprint.py's; this module only hashes
them (no import of the job's config, which holds a SettingsIds).
"""

from __future__ import annotations

import hashlib
import json

from vidcap_ko.record import Record


def digest(*parts) -> str:
    """sha256 (hex) of the parts in order: bytes as they are, anything else as sorted-key JSON."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else json.dumps(part, sort_keys=True, default=str).encode())
        h.update(b"\x1f")
    return h.hexdigest()


def settings_id(settings: dict, instruction: str, adapter: str | None, adapter_identity: str | None) -> str:
    """The id of one record's settings: the job's, its prompt's instruction and its adapter."""
    return digest(settings, instruction, adapter, adapter_identity)[:12]


IdKey = tuple[str, "str | None", bool]  # (task, adapter, segmented): caption/output/checks.py expected_key


class SettingsIds:
    """The settings_id of each (task, adapter, segmented) record a job writes, and which records of an
    output are the job's own.

    The id hashes the settings without `model_path`: the model's content identity (`model_id`) is in
    them, so a model moved, or copied to each node's local disk, gives its records the same id, and a
    different checkpoint at the same path does not. Records written before this rule (vidcap-ko up to
    2026-11-26) hashed `model_path` too; such a record is still the job's own when the old rule, with the
    path the record names, gives its id."""

    def __init__(self, settings: dict, segment_settings: dict, instructions: dict[str, str],
                 adapters: dict[str | None, str | None]):
        self._settings, self._segment_settings = settings, segment_settings
        self._instructions, self._adapters = instructions, adapters
        self.ids: dict[IdKey, str] = {key: self._id(key) for key in
                                      ((task, adapter, segmented) for adapter in adapters for task in instructions
                                       for segmented in (False, True))}
        self._older: dict[tuple[IdKey, str], str] = {}  # (key, a record's model_path) -> the id the old rule gave
        self._owned_older: set[str] = set()  # those found on records of this job's (`owns`)

    def _id(self, key: IdKey, older_rule_path: str | None = None) -> str:
        task, adapter, segmented = key
        settings = {k: v for k, v in (self._segment_settings if segmented else self._settings).items()
                    if k != "model_path"}
        if older_rule_path is not None:
            settings["model_path"] = older_rule_path
        return settings_id(settings, self._instructions[task], adapter, self._adapters[adapter])

    def __getitem__(self, key: IdKey) -> str:
        return self.ids[key]

    def __contains__(self, key: object) -> bool:
        return key in self.ids

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SettingsIds) and self.ids == other.ids

    def items(self):
        return self.ids.items()

    def owns(self, key: IdKey, record: Record) -> bool:
        """Whether `record` (whose expected_key is `key`, one of this job's) was made with this job's settings."""
        found = record.get("settings_id")
        if found == self.ids[key]:
            return True
        path = (record.get("settings") or {}).get("model_path")
        if "model_path" not in self._settings or not isinstance(path, str):  # engine=server: no local model
            return False
        if (key, path) not in self._older:
            self._older[key, path] = self._id(key, path)
        if found != self._older[key, path]:
            return False
        self._owned_older.add(found)
        return True

    def own_ids(self, adapter: object = ..., segmented: bool | None = None) -> set[str]:
        """This job's ids (of one adapter's records, of segments' or whole clips'), with the older rule's ids
        of its own records found so far (`owns`)."""
        keys = [k for k in self.ids if (adapter is ... or k[1] == adapter) and (segmented is None or k[2] == segmented)]
        return {self.ids[k] for k in keys} | {i for (k, _), i in self._older.items() if k in keys and i in self._owned_older}
