"""The retail domain's tool functions (tau2 retail data: products, users, orders).

Written from the data and the policy. Orders move pending → cancelled / "pending (items modified)" and
delivered → "return requested" / "exchange requested". Gift-card balances change immediately (refunds to a
gift card are immediate, per the policy); other methods only get payment-history entries. Returns and
exchanges are requests: items and money move when the user sends the items back, outside the system.
"""

import copy
from collections import Counter
from typing import Any, Literal

from podium.envs.toolkit import ActionKind, CustomerServiceTools, ToolError, action

CANCEL_REASONS = ("no longer needed", "ordered by mistake")


class RetailTools(CustomerServiceTools):
    """Tools of the retail domain."""

    domain = "retail"
    now = "2024-05-15T15:00:00"

    # ------------------------------------------------------------------------------------------- reads

    @action(ActionKind.READ)
    def find_user_id_by_email(self, email: str) -> str:
        """Find a user's id from their email address.

        Args:
            email: The email, such as 'something@example.com'.
        """
        for user_id, user in self.db.table("users").items():
            if user["email"].lower() == email.lower():
                self.db.touch("users", user_id)
                return user_id
        raise ToolError("user not found")

    @action(ActionKind.READ)
    def find_user_id_by_name_zip(self, first_name: str, last_name: str, zip: str) -> str:
        """Find a user's id from their first name, last name and zip code.

        Args:
            first_name: The first name, such as 'John'.
            last_name: The last name, such as 'Doe'.
            zip: The zip code of the user's address, such as '12345'.
        """
        for user_id, user in self.db.table("users").items():
            name = user["name"]
            if (
                name["first_name"].lower() == first_name.lower()
                and name["last_name"].lower() == last_name.lower()
                and user["address"]["zip"] == zip
            ):
                self.db.touch("users", user_id)
                return user_id
        raise ToolError("user not found")

    @action(ActionKind.READ)
    def get_user_details(self, user_id: str) -> dict[str, Any]:
        """Get a user's profile: name, address, email, payment methods and order ids.

        Args:
            user_id: The user id, such as 'sara_doe_496'.
        """
        return copy.deepcopy(self.db.get("users", user_id, "user"))

    @action(ActionKind.READ)
    def get_order_details(self, order_id: str) -> dict[str, Any]:
        """Get an order's status, items, address, fulfilments and payment history.

        Args:
            order_id: The order id, such as '#W0000000' (with the leading '#').
        """
        return copy.deepcopy(self.db.get("orders", order_id, "order"))

    @action(ActionKind.READ)
    def get_product_details(self, product_id: str) -> dict[str, Any]:
        """Get a product type's variants: item id, options, availability and price of each.

        Args:
            product_id: The product id, such as '6086499569' (not an item id).
        """
        return copy.deepcopy(self.db.get("products", product_id, "product"))

    @action(ActionKind.READ)
    def list_all_product_types(self) -> dict[str, str]:
        """List every product type's name and product id."""
        products = self.db.table("products").values()
        return dict(sorted((product["name"], product["product_id"]) for product in products))

    # ------------------------------------------------------------------------------------------ writes

    @action(ActionKind.WRITE)
    def cancel_pending_order(self, order_id: str, reason: Literal["no longer needed", "ordered by mistake"]) -> dict:
        """Cancel a pending order; its payments are refunded (at once to gift cards, else in 5-7 business days).

        Args:
            order_id: The order id, with the leading '#'.
            reason: 'no longer needed' or 'ordered by mistake'.
        """
        order = self._order(order_id, "pending")
        if reason not in CANCEL_REASONS:
            raise ToolError(f"invalid cancellation reason {reason!r}")
        user = self.db.get("users", order["user_id"], "user")
        for payment in [p for p in order["payment_history"] if p["transaction_type"] == "payment"]:
            self._refund(user, order, payment["payment_method_id"], payment["amount"])
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        return copy.deepcopy(order)

    @action(ActionKind.WRITE)
    def modify_pending_order_address(
        self, order_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
    ) -> dict:
        """Change the shipping address of a pending order.

        Args:
            order_id: The order id, with the leading '#'.
            address1: First address line, such as '123 Main St'.
            address2: Second address line, such as 'Apt 1' or ''.
            city: The city.
            state: The state, such as 'CA'.
            country: The country, such as 'USA'.
            zip: The zip code.
        """
        order = self._order(order_id, "pending")
        order["address"] = _address(address1, address2, city, state, country, zip)
        return copy.deepcopy(order)

    @action(ActionKind.WRITE)
    def modify_pending_order_payment(self, order_id: str, payment_method_id: str) -> dict:
        """Pay a pending order with a different method; the original payment is refunded.

        Args:
            order_id: The order id, with the leading '#'.
            payment_method_id: The new payment method's id from the user's profile.
        """
        order = self._order(order_id, "pending")
        payments = [p for p in order["payment_history"] if p["transaction_type"] == "payment"]
        if len(payments) != 1:
            raise ToolError("only an order paid with a single payment can change its payment method")
        original = payments[0]
        if original["payment_method_id"] == payment_method_id:
            raise ToolError("the new payment method must differ from the original one")
        user = self.db.get("users", order["user_id"], "user")
        self._pay(user, order, payment_method_id, original["amount"])
        self._refund(user, order, original["payment_method_id"], original["amount"])
        return copy.deepcopy(order)

    @action(ActionKind.WRITE)
    def modify_pending_order_items(
        self, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
    ) -> dict:
        """Swap items of a pending order for other variants of the same products; allowed once per order.

        Args:
            order_id: The order id, with the leading '#'.
            item_ids: The item ids to change (repeat an id to change several of the same item).
            new_item_ids: The new item ids, one per item id, in the same order.
            payment_method_id: Payment method that pays or receives the price difference.
        """
        order = self._order(order_id, "pending")
        user = self.db.get("users", order["user_id"], "user")
        replacements = self._replacements(order, item_ids, new_item_ids)
        difference = round(sum(new["price"] - old["price"] for old, new in replacements), 2)
        if difference > 0:
            self._pay(user, order, payment_method_id, difference)
        elif difference < 0:
            self._refund(user, order, payment_method_id, -difference)
        else:
            self._method(user, payment_method_id)
        for old, new in replacements:
            old.update(item_id=new["item_id"], price=new["price"], options=dict(new["options"]))
        order["status"] = "pending (items modified)"
        return copy.deepcopy(order)

    @action(ActionKind.WRITE)
    def return_delivered_order_items(self, order_id: str, item_ids: list[str], payment_method_id: str) -> dict:
        """Request a return of delivered items; the refund goes to the original method or an existing gift card.

        Args:
            order_id: The order id, with the leading '#'.
            item_ids: The item ids to return (repeat an id to return several).
            payment_method_id: The original payment method's id, or a gift card's id.
        """
        order = self._order(order_id, "delivered")
        user = self.db.get("users", order["user_id"], "user")
        method = self._method(user, payment_method_id)
        originals = {p["payment_method_id"] for p in order["payment_history"]}
        if payment_method_id not in originals and method["source"] != "gift_card":
            raise ToolError("the refund must go to the original payment method or a gift card")
        self._check_items(order, item_ids)
        order["status"] = "return requested"
        order["return_items"] = sorted(item_ids)
        order["return_payment_method_id"] = payment_method_id
        return copy.deepcopy(order)

    @action(ActionKind.WRITE)
    def exchange_delivered_order_items(
        self, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
    ) -> dict:
        """Request an exchange of delivered items for other variants of the same products; allowed once per order.

        Args:
            order_id: The order id, with the leading '#'.
            item_ids: The item ids to exchange (repeat an id to exchange several).
            new_item_ids: The new item ids, one per item id, in the same order.
            payment_method_id: Payment method that pays or receives the price difference.
        """
        order = self._order(order_id, "delivered")
        user = self.db.get("users", order["user_id"], "user")
        replacements = self._replacements(order, item_ids, new_item_ids)
        difference = round(sum(new["price"] - old["price"] for old, new in replacements), 2)
        method = self._method(user, payment_method_id)
        if method["source"] == "gift_card" and difference > method["balance"]:
            raise ToolError(f"gift card {payment_method_id} balance is not enough for the difference")
        order["status"] = "exchange requested"
        order["exchange_items"] = sorted(item_ids)
        order["exchange_new_items"] = sorted(new_item_ids)
        order["exchange_payment_method_id"] = payment_method_id
        order["exchange_price_difference"] = difference
        return copy.deepcopy(order)

    @action(ActionKind.WRITE)
    def modify_user_address(
        self, user_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
    ) -> dict:
        """Change a user's default address.

        Args:
            user_id: The user id.
            address1: First address line, such as '123 Main St'.
            address2: Second address line, such as 'Apt 1' or ''.
            city: The city.
            state: The state, such as 'CA'.
            country: The country, such as 'USA'.
            zip: The zip code.
        """
        user = self.db.get("users", user_id, "user")
        user["address"] = _address(address1, address2, city, state, country, zip)
        return copy.deepcopy(user)

    # ----------------------------------------------------------------------------------------- helpers

    def _order(self, order_id: str, status: str) -> dict[str, Any]:
        order = self.db.get("orders", order_id, "order")
        if order["status"] != status:
            raise ToolError(f"order {order_id} is {order['status']}, not {status}")
        return order

    def _method(self, user: dict[str, Any], payment_method_id: str) -> dict[str, Any]:
        method = user["payment_methods"].get(payment_method_id)
        if method is None:
            raise ToolError(f"payment method {payment_method_id} is not in the user's profile")
        return method

    def _pay(self, user: dict[str, Any], order: dict[str, Any], payment_method_id: str, amount: float) -> None:
        method = self._method(user, payment_method_id)
        if method["source"] == "gift_card":
            if amount > method["balance"] + 1e-6:
                raise ToolError(f"gift card {payment_method_id} balance is not enough")
            method["balance"] = round(method["balance"] - amount, 2)
        entry = {"transaction_type": "payment", "amount": amount, "payment_method_id": payment_method_id}
        order["payment_history"].append(entry)

    def _refund(self, user: dict[str, Any], order: dict[str, Any], payment_method_id: str, amount: float) -> None:
        method = self._method(user, payment_method_id)
        if method["source"] == "gift_card":
            method["balance"] = round(method["balance"] + amount, 2)
        entry = {"transaction_type": "refund", "amount": amount, "payment_method_id": payment_method_id}
        order["payment_history"].append(entry)

    def _check_items(self, order: dict[str, Any], item_ids: list[str]) -> None:
        if not item_ids:
            raise ToolError("no items given")
        available = Counter(item["item_id"] for item in order["items"])
        for item_id, count in Counter(item_ids).items():
            if available[item_id] < count:
                raise ToolError(f"item {item_id} is not in order {order['order_id']} {count} time(s)")

    def _replacements(
        self, order: dict[str, Any], item_ids: list[str], new_item_ids: list[str]
    ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(order line, new variant) pairs, checked: same product, available variant. The same item id is
        allowed (a replacement for a broken item); that options differ is the policy's rule, for the agent."""
        if len(item_ids) != len(new_item_ids):
            raise ToolError("the number of items to change and of new items must match")
        self._check_items(order, item_ids)
        lines = list(order["items"])
        pairs = []
        for item_id, new_item_id in zip(item_ids, new_item_ids, strict=True):
            line = next(line for line in lines if line["item_id"] == item_id)
            lines.remove(line)
            product = self.db.get("products", line["product_id"], "product")
            new = product["variants"].get(new_item_id)
            if new is None:
                raise ToolError(f"item {new_item_id} is not a variant of product {line['name']}")
            if not new["available"]:
                raise ToolError(f"item {new_item_id} is not available")
            pairs.append((line, new))
        return pairs


def _address(address1: str, address2: str, city: str, state: str, country: str, zip: str) -> dict[str, str]:
    return {"address1": address1, "address2": address2, "city": city, "country": country, "state": state, "zip": zip}
