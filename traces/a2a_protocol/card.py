"""The agent card served at /.well-known/agent-card.json (public, no token).

Built per request: the skills are the presets offered to A2A callers
(AGENT_A2A_PRESETS, presets may be added in the admin at any time), and the
interfaces' URLs follow the scheme and host the card was fetched from (a proxy
in front passes Host and X-Forwarded-Proto; daphne runs with --proxy-headers).
"""

from __future__ import annotations

from a2a.types import a2a_pb2 as pb
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol
from django.conf import settings

from memory.presets import UnknownPreset, get_preset
from traces.a2a_protocol.send import offered_presets

JSONRPC_PATH = "/a2a/jsonrpc"
REST_PATH = "/a2a/rest"
SCHEME = "agentsiteToken"
INPUT_MODES = ["text/plain", "application/json"]
OUTPUT_MODES = ["text/plain", "application/json", "application/octet-stream"]


def _skill(name: str) -> pb.AgentSkill:
    try:
        description = get_preset(name).description
    except UnknownPreset:
        description = None
    return pb.AgentSkill(
        id=name,
        name=name,
        description=description or f"agentsite agent with the {name!r} preset",
        tags=["agentsite-preset"],
        input_modes=INPUT_MODES,
        output_modes=OUTPUT_MODES,
    )


def agent_card(base_url: str) -> pb.AgentCard:
    """This instance's card; `base_url` is "scheme://host[:port]" without a slash."""
    card = pb.AgentCard(
        name=settings.AGENT_A2A_NAME,
        description=settings.AGENT_A2A_DESCRIPTION,
        version=settings.AGENT_A2A_VERSION,
        documentation_url=f"{base_url}/api/docs/",
        provider=pb.AgentProvider(organization=settings.AGENT_A2A_NAME, url=base_url),
        capabilities=pb.AgentCapabilities(
            streaming=True, push_notifications=False, extended_agent_card=False
        ),
        default_input_modes=INPUT_MODES,
        default_output_modes=OUTPUT_MODES,
        skills=[_skill(name) for name in offered_presets()],
    )
    card.supported_interfaces.extend(
        [
            pb.AgentInterface(
                url=base_url + JSONRPC_PATH,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_CURRENT,
            ),
            pb.AgentInterface(
                url=base_url + REST_PATH,
                protocol_binding=TransportProtocol.HTTP_JSON.value,
                protocol_version=PROTOCOL_VERSION_CURRENT,
            ),
        ]
    )
    card.security_schemes[SCHEME].http_auth_security_scheme.CopyFrom(
        pb.HTTPAuthSecurityScheme(
            scheme="bearer",
            description="an agentsite API token (the REST API's; `Authorization: Token <key>` works too)",
        )
    )
    requirement = card.security_requirements.add()
    requirement.schemes[SCHEME].CopyFrom(pb.StringList())
    return card
