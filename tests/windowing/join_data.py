"""TestJoinBolt's data (Storm's storm-client test of JoinBolt), fields in snake_case."""

from __future__ import annotations

from typing import Any

USER_FIELDS = ("user_id", "name", "city")
USERS = [
    (1, "roshan", "san jose"), (2, "harsha", "santa clara"), (3, "siva", "dublin"),
    (4, "hugo", "san mateo"), (5, "suresh", "sunnyvale"), (6, "guru", "palo alto"),
    (7, "arun", "bengaluru"), (8, "satish", "mumbai"), (9, "mani", "bengaluru"),
    (10, "priyank", "seattle"),
]
ORDER_FIELDS = ("order_id", "user_id", "item_id", "price")
ORDERS = [
    (11, 2, 21, 7), (12, 2, 22, 3), (13, 3, 23, 4), (14, 4, 24, 5), (15, 5, 25, 2),
    (16, 6, 26, 7), (17, 6, 27, 4), (18, 7, 28, 2), (19, 8, 29, 9),
]
STORE_FIELDS = ("store_id", "store_name", "city")
STORES = [
    (1, "store1", "san jose"), (2, "store2", "santa clara"), (3, "store3", "dublin"),
    (4, "store4", "san mateo"), (5, "store5", "bengaluru"),
]
CITY_FIELDS = ("city_id", "city_name", "country")
CITIES = [
    (1, "san jose", "US"), (2, "santa clara", "US"), (3, "dublin", "US"), (4, "san mateo", "US"),
    (5, "sunnyvale", "US"), (6, "palo alto", "US"), (7, "bengaluru", "India"), (8, "mumbai", "India"),
    (9, "chennai", "India"),
]


def entries(stream: str, fields: tuple[str, ...], rows: list[tuple[Any, ...]]) -> list[tuple[str, Any, Any]]:
    """A window's entries for the pure core: (stream, values as a dict, a ref naming the row)."""
    return [(stream, dict(zip(fields, row, strict=True)), (stream, i)) for i, row in enumerate(rows)]


def users() -> list[tuple[str, Any, Any]]:
    return entries("users", USER_FIELDS, USERS)


def orders() -> list[tuple[str, Any, Any]]:
    return entries("orders", ORDER_FIELDS, ORDERS)


def stores() -> list[tuple[str, Any, Any]]:
    return entries("stores", STORE_FIELDS, STORES)


def cities() -> list[tuple[str, Any, Any]]:
    return entries("cities", CITY_FIELDS, CITIES)
