"""Settings: TOML + environment precedence, named errors, and keys from a .env file that are
used but never copied into the environment or the settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from arcticqa.config import load_settings
from arcticqa.errors import ConfigError


def test_environment_overrides_the_toml_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "a.toml"
    cfg.write_text('[build]\nbatch_size = 7\npaper_concurrency = 3\n', encoding="utf-8")
    monkeypatch.setenv("ARCTICQA_BUILD__BATCH_SIZE", "11")
    settings = load_settings(cfg)
    assert (settings.build.batch_size, settings.build.paper_concurrency) == (11, 3)


def test_unknown_setting_and_bad_toml_are_named_errors(tmp_path: Path) -> None:
    cfg = tmp_path / "a.toml"
    cfg.write_text('[build]\nbatchsize = 7\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"a\.toml: setting 'build\.batchsize'"):
        load_settings(cfg)
    cfg.write_text('[build\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_settings(cfg)
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "missing.toml")


def test_keys_from_an_env_file_are_used_but_not_exported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARCTICQA_DOTENV_TEST_KEY", raising=False)
    env = tmp_path / ".env"
    env.write_text("ARCTICQA_DOTENV_TEST_KEY=sk-from-dotenv-123456\n", encoding="utf-8")
    cfg = tmp_path / "a.toml"
    cfg.write_text(f'env_file = "{env}"\n[models.m]\nprovider = "openai"\nmodel = "x"\n'
                   f'api_key_env = "ARCTICQA_DOTENV_TEST_KEY"\n[roles]\nverifier = "m"\n', encoding="utf-8")
    settings = load_settings(cfg)
    assert settings.model_for("verifier").api_key() == "sk-from-dotenv-123456"
    assert "ARCTICQA_DOTENV_TEST_KEY" not in os.environ
    assert "sk-from-dotenv" not in settings.model_dump_json()
    monkeypatch.setenv("ARCTICQA_ENV_FILE", str(tmp_path / "nope.env"))
    with pytest.raises(ConfigError, match="env file not found"):
        load_settings()


def test_roles_left_unmapped_or_mapped_to_offline_work_beside_user_models(tmp_path: Path) -> None:
    cfg = tmp_path / "a.toml"
    cfg.write_text('[models.local]\nprovider = "openai"\nmodel = "m"\napi_key_env = ""\n'
                   '[roles]\nverifier = "local"\nsite_extractor = "offline"\n', encoding="utf-8")
    settings = load_settings(cfg)
    assert settings.model_for("verifier").model == "m"
    assert settings.model_for("site_extractor").provider == "offline"
    assert settings.model_for("question_writer").provider == "offline"
    assert settings.model_for("verifier").api_key() == "not-needed"


def test_refusal_and_length_re_ask_settings_are_validated(tmp_path: Path) -> None:
    cfg = tmp_path / "a.toml"
    head = '[models.m]\nprovider = "openai"\nmodel = "x"\napi_key_env = ""\nmax_tokens = 1000\n'
    cfg.write_text(head + "max_refusal_reasks = 0\nmax_length_reasks = 2\nmax_tokens_ceiling = 3000\n",
                   encoding="utf-8")
    m = load_settings(cfg).models["m"]
    assert (m.max_refusal_reasks, m.max_length_reasks, m.max_tokens_ceiling) == (0, 2, 3000)
    for bad, named in [("max_refusal_reasks = -1", "max_refusal_reasks"), ("max_length_reasks = -1", "max_length_reasks"),
                       ("max_tokens_ceiling = 999", "below max_tokens")]:
        cfg.write_text(head + bad + "\n", encoding="utf-8")
        with pytest.raises(ConfigError, match=named):
            load_settings(cfg)
