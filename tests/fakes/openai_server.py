"""The OpenAI-compatible stand-in used by the tests (it ships in the package for the demo)."""

from arcticqa.llm.local_server import (
    Drop,
    FakeOpenAIServer,
    Fault,
    Hang,
    RecordedRequest,
    Reply,
    by_role,
    json_reply,
    role_of,
)

__all__ = ["Drop", "FakeOpenAIServer", "Fault", "Hang", "RecordedRequest", "Reply", "by_role",
           "json_reply", "role_of"]
