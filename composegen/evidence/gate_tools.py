"""The gates' tool catalogue: distinct typed tools (required fields, enums, integer ranges, nested
objects, arrays), each with a prompt that names it. `tool_specs(n)` gives N of them, renamed
variants past the end."""

from __future__ import annotations

from typing import Any, NamedTuple

from composegen.errors import BadInput
from composegen.report import JsonObject


def _s(description: str) -> JsonObject:
    return {"type": "string", "description": description}


def _i(description: str, lo: int, hi: int) -> JsonObject:
    return {"type": "integer", "description": description, "minimum": lo, "maximum": hi}


def _e(*values: Any) -> JsonObject:
    return {
        "enum": list(values),
        **({"type": "string"} if all(isinstance(v, str) for v in values) else {}),
    }


def _o(required: list[str], **props: JsonObject) -> JsonObject:
    return {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


_NUM, _BOOL = {"type": "number"}, {"type": "boolean"}
_CURRENCY = ("USD", "EUR", "GBP", "JPY")


def _tool(
    description: str, prompt: str, required: list[str], **props: JsonObject
) -> tuple[str, JsonObject, str]:
    return description, _o(required, **props), prompt


# name -> (description, parameters, a user request that needs this tool)
_TOOLS = {
    "get_weather": _tool(
        "Current weather for a city",
        "What is the weather in Oakland right now, in fahrenheit?",
        ["city"],
        city=_s("city"),
        unit=_e("celsius", "fahrenheit"),
    ),
    "book_flight": _tool(
        "Book a flight",
        "Book a business flight from Boston to Denver for two people.",
        ["origin", "destination", "passengers", "cabin"],
        origin=_s("IATA code"),
        destination=_s("IATA code"),
        passengers=_i("travellers", 1, 9),
        cabin=_e("economy", "premium", "business"),
    ),
    "create_calendar_event": _tool(
        "Create a calendar event",
        "Put a 30 minute Design Review on my calendar tomorrow at 10:00.",
        ["title", "start", "duration_minutes"],
        title=_s("title"),
        start=_s("ISO 8601"),
        duration_minutes=_i("length", 5, 480),
        attendees={"type": "array", "items": _s("email")},
    ),
    "send_email": _tool(
        "Send an email",
        "Email Dana that the Quarterly Report is ready.",
        ["to", "subject", "body"],
        to=_s("address"),
        subject=_s("subject line"),
        body=_s("plain text"),
        priority=_e("low", "normal", "high"),
    ),
    "convert_currency": _tool(
        "Convert money",
        "Convert 250 US dollars to euros.",
        ["amount", "source", "target"],
        amount={**_NUM, "minimum": 0},
        source=_e(*_CURRENCY),
        target=_e(*_CURRENCY),
    ),
    "search_products": _tool(
        "Search the catalogue",
        "Find Trail Running shoes under 120 dollars.",
        ["query"],
        query=_s("words"),
        max_results=_i("page", 1, 50),
        filters=_o([], min_price=_NUM, max_price=_NUM, in_stock=_BOOL),
    ),
    "set_thermostat": _tool(
        "Set a thermostat",
        "Heat the bedroom to 21 degrees.",
        ["room", "temperature_c", "mode"],
        room=_e("living", "bedroom", "office"),
        temperature_c=_i("target", 10, 30),
        mode=_e("heat", "cool", "auto"),
    ),
    "create_support_ticket": _tool(
        "Open a support ticket",
        "Open a severity 2 ticket for Maria Lopez: the Billing Page times out.",
        ["customer", "severity", "summary"],
        customer=_o(["name", "email"], name=_s("full name"), email=_s("address")),
        severity=_e(1, 2, 3, 4),
        summary=_s("one line"),
    ),
    "schedule_delivery": _tool(
        "Schedule a delivery",
        "Deliver my parcel to 12 Main Street, Springfield on Friday.",
        ["address", "date"],
        address=_o(
            ["street", "city", "postal_code"],
            street=_s("street"),
            city=_s("city"),
            postal_code=_s("postal code"),
        ),
        date=_s("YYYY-MM-DD"),
        window=_e("morning", "afternoon", "evening"),
    ),
    "translate_text": _tool(
        "Translate text",
        "Translate Good Morning into French.",
        ["text", "target_language"],
        text=_s("source text"),
        target_language=_e("de", "fr", "es", "ja"),
    ),
    "get_stock_quote": _tool(
        "Latest stock quote",
        "What is the latest quote for NVDA on the NASDAQ?",
        ["symbol"],
        symbol=_s("ticker"),
        exchange=_e("NYSE", "NASDAQ"),
    ),
    "reserve_table": _tool(
        "Reserve a table",
        "Reserve a table for four at Chez Panisse at 19:30.",
        ["restaurant", "party_size", "time"],
        restaurant=_s("name"),
        party_size=_i("guests", 1, 20),
        time=_s("HH:MM"),
    ),
    "lookup_order": _tool(
        "Look up an order",
        "Where is order 48213? Include the items.",
        ["order_id"],
        order_id=_i("order number", 1, 10**9),
        include_items=_BOOL,
    ),
    "resize_image": _tool(
        "Resize an image",
        "Resize the Logo to 512 by 512 as a PNG.",
        ["width", "height", "format"],
        width=_i("pixels", 16, 8192),
        height=_i("pixels", 16, 8192),
        format=_e("png", "jpeg", "webp"),
    ),
    "add_todo": _tool(
        "Add a to-do item",
        "Add Renew Passport to my to-do list with top priority.",
        ["title"],
        title=_s("what to do"),
        tags={"type": "array", "items": _s("tag")},
        priority=_i("1 = highest", 1, 5),
    ),
    "rate_movie": _tool(
        "Rate a movie",
        "Give Spirited Away five stars.",
        ["title", "stars"],
        title=_s("title"),
        stars=_i("1-5", 1, 5),
        review=_s("text"),
    ),
    "start_timer": _tool(
        "Start a timer",
        "Start a Tea timer for four minutes.",
        ["label", "seconds"],
        label=_s("name"),
        seconds=_i("duration", 1, 86400),
    ),
    "compute_route": _tool(
        "Route between waypoints",
        "Cycle from 37.80,-122.27 to 37.87,-122.26.",
        ["waypoints", "mode"],
        waypoints={
            "type": "array",
            "minItems": 2,
            "items": _o(
                ["lat", "lon"],
                lat={**_NUM, "minimum": -90, "maximum": 90},
                lon={**_NUM, "minimum": -180, "maximum": 180},
            ),
        },
        mode=_e("driving", "walking", "cycling"),
    ),
    "update_profile": _tool(
        "Update user settings",
        "Switch user 7781 to German and turn notifications off.",
        ["user_id", "settings"],
        user_id=_i("account", 1, 10**9),
        settings=_o(
            ["language", "notifications"],
            language=_e("en", "de", "fr"),
            notifications=_BOOL,
            timezone=_s("IANA zone"),
        ),
    ),
    "run_sql_query": _tool(
        "Run a read-only SQL query",
        "On the Analytics database, count new signups.",
        ["database", "query"],
        database=_e("analytics", "billing"),
        query=_s("SELECT statement"),
        limit=_i("row cap", 1, 1000),
    ),
}
TOOL_CATALOG: list[tuple[str, str, dict, str]] = [(name, *tool) for name, tool in _TOOLS.items()]
WEATHER = TOOL_CATALOG[0]


class GateTool(NamedTuple):
    name: str
    # the OpenAI wire's tool definition, sent as it is: {"type": "function", "function": ...}
    spec: JsonObject
    prompt: str


def tool_specs(n: int) -> list[GateTool]:
    """N distinct tools; past the catalogue, renamed variants."""
    if n < 1:
        raise BadInput(f"gate: --tools: must be at least 1, got {n}")
    out: list[GateTool] = []
    for i in range(n):
        name, desc, params, prompt = TOOL_CATALOG[i % len(TOOL_CATALOG)]
        round_ = i // len(TOOL_CATALOG)
        if round_:
            name, desc = f"{name}_v{round_ + 1}", f"{desc} (variant {round_ + 1})"
        tool = {
            "type": "function",
            "function": {"name": name, "description": desc, "parameters": params},
        }
        out.append(GateTool(name, tool, prompt))
    return out
