"""Fake secrets of every kind daari's detector knows (docs/privacy.md), as they show up in a tool result: a `.env`
file, a config, a shell session. None is a real credential. The false-positive corpus (evals/privacy) skips this
file: every line of it is meant to be found."""

from __future__ import annotations

SECRETS = {
    "AWS_ACCESS_KEY": "AKIA" + "Q3EGRZ7TK5NB2XWD",
    "GITHUB_TOKEN": "ghp_" + "r8Kq2LmZ0xVb7TnY4wPc1sHd9JfG3aEu6Qio",
    "ANTHROPIC_KEY": "sk-ant-api03-" + "Zp4mK9qW2xR7tY1uI8oP3aS6dF0gH5jKl_-ZxCvBnM2qWeRtYu",
    "OPENAI_KEY": "sk-proj-" + "Hq7Lm2Zx9Vb4Tn1Yw8Pc3Sd6Jf0Ga5EuRk7Wq2Xt9Ym4Bn",
    "GOOGLE_API_KEY": "AIza" + "SyB7xQ2mZ9kL4vT1nW8pC3sD6jF0gH5eRuQ",
    "SLACK_TOKEN": "xoxb-" + "2154896312-7351209846-Qm4Zx8Kp2Lw9Vt1Yn7Bc3Sd6",
    "STRIPE_KEY": "sk_live_" + "51Hq7Lm2Zx9Vb4Tn1Yw8Pc3Sd",
    "JWT": ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + "eyJzdWIiOiJ1c2VyLTQyIiwiZXhwIjoxOTAwMDAwMDAwfQ."
            + "Xq7Lm2Zx9Vb4Tn1Yw8Pc3Sd6Jf0Ga5EuRk7Wq2Xt9Y"),
    "PRIVATE_KEY": ("-----BEGIN OPENSSH PRIVATE KEY-----\n"
                    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
                    "QyNTUxOQAAACBq7Lm2Zx9Vb4Tn1Yw8Pc3Sd6Jf0Ga5EuRk7Wq2Xt9YwAAAJgAAAAA\n"
                    "-----END OPENSSH PRIVATE KEY-----"),
    "SECRET": "Zr8!kQ2m#Lp9vX4w",  # a password in a .env assignment
    "TOKEN": "9fQ2mZ8kL4vT1nW7pC3sD6jF0gH5eRuX",  # a bearer token in a curl command
}


def tool_output() -> str:
    """What an agent's `cat`/`grep` of a project might return, holding every fixture secret once."""
    s = SECRETS
    return (
        "$ cat .env.production deploy/id_ed25519 config/settings.yaml\n"
        f"AWS_ACCESS_KEY_ID={s['AWS_ACCESS_KEY']}\n"
        f"GITHUB_TOKEN={s['GITHUB_TOKEN']}\n"
        f"ANTHROPIC_API_KEY={s['ANTHROPIC_KEY']}\n"
        f"OPENAI_API_KEY={s['OPENAI_KEY']}\n"
        f"GOOGLE_MAPS_KEY={s['GOOGLE_API_KEY']}\n"
        f"SLACK_BOT={s['SLACK_TOKEN']}\n"
        f"STRIPE={s['STRIPE_KEY']}\n"
        f"SESSION_JWT={s['JWT']}\n"
        f"DB_PASSWORD={s['SECRET']}\n"
        f"{s['PRIVATE_KEY']}\n"
        f"$ curl -H 'Authorization: Bearer {s['TOKEN']}' https://api.example.com/v1/items\n"
        "DEBUG=true\nPORT=8080\n"
    )
