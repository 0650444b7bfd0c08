"""The configuration reference's rule (issue 56): every environment variable settings.py reads has a description
comment, at the end of its line or right above its statement or dict entry; the error names each one without."""

from __future__ import annotations

import pytest

from hub.manual.settings_doc import UndescribedSetting, read_settings, settings_table

SOURCE = '''# Section
# --- a rule, not a description ---
A = env("HUB_A", "1")  # what A does

# what B does,
# over two lines
B = env("HUB_B")
C = {
    "x": env("HUB_C", str(VAR_DIR / "c")),
    # what D does
    "y": env_bool("HUB_D"),
    "z": int(env("HUB_Z", "5")),  # what Z does
}
# --- another rule ---
E = int(env("HUB_E", "3")) * 1024
F = os.environ.get("HUB_F", "")
'''


def test_descriptions_defaults_and_settings_are_read_from_the_source():
    rows = {row.variable: row for row in read_settings(SOURCE)}
    assert list(rows) == ["HUB_A", "HUB_B", "HUB_C", "HUB_D", "HUB_Z", "HUB_E", "HUB_F"]
    assert rows["HUB_A"].description == "what A does" and rows["HUB_A"].default == "1"
    assert rows["HUB_B"].description == "what B does, over two lines" and rows["HUB_B"].default == ""
    assert rows["HUB_C"].description == "" and rows["HUB_C"].default == 'VAR_DIR / "c"'
    assert rows["HUB_D"].description == "what D does" and rows["HUB_D"].setting == "C['y']"
    assert rows["HUB_Z"].description == "what Z does" and rows["HUB_Z"].setting == "C['z']"
    assert rows["HUB_E"].description == "" and rows["HUB_E"].line == 15


def test_the_error_names_exactly_the_settings_without_a_description(tmp_path):
    path = tmp_path / "settings.py"
    path.write_text(SOURCE)
    with pytest.raises(UndescribedSetting) as refused:
        settings_table(path)
    message = str(refused.value)
    assert "HUB_C (line 9)" in message and "HUB_E (line 15)" in message and "HUB_F (line 16)" in message
    assert not [name for name in ("HUB_A", "HUB_B", "HUB_D", "HUB_Z") if name in message]


def test_every_setting_of_the_hub_has_a_description():
    rows = settings_table()
    assert len(rows) > 100 and all(row.description for row in rows)
    assert {"DATABASE_URL", "HUB_BROKER_URL", "HUB_DOCS_DIR"} <= {row.variable for row in rows}
