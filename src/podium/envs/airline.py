"""The airline domain's tool functions (tau2 airline data: flights, users, reservations).

Written from the data and the policy: prices come from the flight's date entry, 30 dollars of insurance per
passenger, 50 dollars per non-free bag. The functions check data integrity (ids exist, seats and balances
suffice, amounts add up); the policy's business rules (who may cancel, basic economy changes…) are the agent's
to apply, as the policy itself says. Gift cards and certificates are debited when used; refunds of a cancelled
reservation are recorded in its payment history and go back to the original methods outside the system.
"""

import copy
from datetime import date as Date
from datetime import timedelta
from typing import Any, Literal

from typing_extensions import TypedDict

from podium.envs.toolkit import ActionKind, CustomerServiceTools, ToolError, action

Cabin = Literal["basic_economy", "economy", "business"]
INSURANCE_PER_PASSENGER = 30
BAG_PRICE = 50
STORED_VALUE = ("gift_card", "certificate")
"""Payment sources with a balance (the ``amount`` field) that is debited on use."""


class FlightRef(TypedDict):
    """One flight of an itinerary."""

    flight_number: str
    date: str


class Passenger(TypedDict):
    """A traveller."""

    first_name: str
    last_name: str
    dob: str


class PaymentAmount(TypedDict):
    """Part of a payment."""

    payment_id: str
    amount: float


class AirlineTools(CustomerServiceTools):
    """Tools of the airline domain."""

    domain = "airline"
    now = "2024-05-15T15:00:00"

    # ------------------------------------------------------------------------------------------- reads

    @action(ActionKind.READ)
    def get_user_details(self, user_id: str) -> dict[str, Any]:
        """Get a user's profile: name, addresses, payment methods, membership and reservation ids.

        Args:
            user_id: The user id, such as 'sara_doe_496'.
        """
        return copy.deepcopy(self.db.get("users", user_id, "user"))

    @action(ActionKind.READ)
    def get_reservation_details(self, reservation_id: str) -> dict[str, Any]:
        """Get the details of a reservation.

        Args:
            reservation_id: The reservation id, such as '8JX2WO'.
        """
        return copy.deepcopy(self.db.get("reservations", reservation_id, "reservation"))

    @action(ActionKind.READ)
    def get_flight_status(self, flight_number: str, date: str) -> str:
        """Get the status of a flight on a date.

        Args:
            flight_number: The flight number, such as 'HAT001'.
            date: The date in YYYY-MM-DD format.
        """
        return self._flight_date(flight_number, date)["status"]

    @action(ActionKind.READ)
    def list_all_airports(self) -> list[str]:
        """List the IATA codes of every airport the airline serves."""
        flights = self.db.table("flights").values()
        return sorted({code for flight in flights for code in (flight["origin"], flight["destination"])})

    @action(ActionKind.READ)
    def search_direct_flight(self, origin: str, destination: str, date: str) -> list[dict[str, Any]]:
        """Search direct flights between two airports on a date that can still be booked.

        Args:
            origin: Origin airport IATA code, such as 'JFK'.
            destination: Destination airport IATA code, such as 'LAX'.
            date: The date in YYYY-MM-DD format.
        """
        return [self._offer(number, date) for number in self._bookable(origin, destination, date)]

    @action(ActionKind.READ)
    def search_onestop_flight(self, origin: str, destination: str, date: str) -> list[list[dict[str, Any]]]:
        """Search one-stop itineraries between two airports departing on a date; each result is two flights.

        Args:
            origin: Origin airport IATA code, such as 'JFK'.
            destination: Destination airport IATA code, such as 'LAX'.
            date: The departure date in YYYY-MM-DD format.
        """
        flights = self.db.table("flights")
        itineraries = []
        for first in self._bookable(origin, None, date):
            leg = flights[first]
            overnight = leg["scheduled_arrival_time_est"].endswith("+1")
            second_date = (Date.fromisoformat(date) + timedelta(days=1)).isoformat() if overnight else date
            arrival = leg["scheduled_arrival_time_est"].removesuffix("+1")
            for second in self._bookable(leg["destination"], destination, second_date):
                departs = flights[second]["scheduled_departure_time_est"]
                if overnight or departs > arrival:
                    itineraries.append([self._offer(first, date), self._offer(second, second_date)])
        return itineraries

    # ------------------------------------------------------------------------------------------ writes

    @action(ActionKind.WRITE)
    def book_reservation(
        self,
        user_id: str,
        origin: str,
        destination: str,
        flight_type: Literal["one_way", "round_trip"],
        cabin: Cabin,
        flights: list[FlightRef],
        passengers: list[Passenger],
        payment_methods: list[PaymentAmount],
        total_baggages: int,
        nonfree_baggages: int,
        insurance: Literal["yes", "no"],
    ) -> dict[str, Any]:
        """Book a reservation; the payments must add up to the total price.

        Args:
            user_id: The booking user's id.
            origin: Origin airport IATA code of the trip.
            destination: Destination airport IATA code of the trip.
            flight_type: 'one_way' or 'round_trip'.
            cabin: The cabin class, the same for every flight.
            flights: Every flight of the itinerary, each with flight number and date.
            passengers: Each passenger's first name, last name and date of birth.
            payment_methods: Payment ids from the user's profile with the amount charged to each.
            total_baggages: Checked bags in total.
            nonfree_baggages: Checked bags beyond the free allowance (50 dollars each).
            insurance: Whether to buy travel insurance (30 dollars per passenger).
        """
        user = self.db.get("users", user_id, "user")
        if not passengers:
            raise ToolError("a reservation needs at least one passenger")
        legs = [self._take_seats(ref, cabin, len(passengers)) for ref in flights]
        total = sum(leg["price"] for leg in legs) * len(passengers) + BAG_PRICE * nonfree_baggages
        total += INSURANCE_PER_PASSENGER * len(passengers) if insurance == "yes" else 0
        paid = sum(part["amount"] for part in payment_methods)
        if abs(paid - total) > 1e-6:
            raise ToolError(f"payments add up to {paid} but the total price is {total}")
        for part in payment_methods:
            self._charge(user, part["payment_id"], part["amount"])
        key = self.new_id("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 6, self.db.table("reservations"))
        reservation = {
            "reservation_id": key,
            "user_id": user_id,
            "origin": origin,
            "destination": destination,
            "flight_type": flight_type,
            "cabin": cabin,
            "flights": legs,
            "passengers": [dict(p) for p in passengers],
            "payment_history": [{"payment_id": p["payment_id"], "amount": p["amount"]} for p in payment_methods],
            "created_at": self.now,
            "total_baggages": total_baggages,
            "nonfree_baggages": nonfree_baggages,
            "insurance": insurance,
        }
        self.db.insert("reservations", key, reservation)
        user["reservations"].append(key)
        return copy.deepcopy(reservation)

    @action(ActionKind.WRITE)
    def cancel_reservation(self, reservation_id: str) -> dict[str, Any]:
        """Cancel a reservation; every payment is refunded to its original method.

        Args:
            reservation_id: The reservation id.
        """
        reservation = self.db.get("reservations", reservation_id, "reservation")
        if reservation.get("status") == "cancelled":
            raise ToolError(f"reservation {reservation_id} is already cancelled")
        for leg in reservation["flights"]:
            self._release_seats(leg, reservation["cabin"], len(reservation["passengers"]))
        refunds = [{"payment_id": p["payment_id"], "amount": -p["amount"]} for p in reservation["payment_history"]]
        reservation["payment_history"].extend(refunds)
        reservation["status"] = "cancelled"
        return copy.deepcopy(reservation)

    @action(ActionKind.WRITE)
    def update_reservation_flights(
        self, reservation_id: str, cabin: Cabin, flights: list[FlightRef], payment_id: str
    ) -> dict[str, Any]:
        """Change the flights or cabin of a reservation; flights kept in the same cabin keep their price.

        Args:
            reservation_id: The reservation id.
            cabin: The cabin class of the new itinerary.
            flights: Every flight of the new itinerary (kept ones too), each with flight number and date.
            payment_id: Payment method from the user's profile that pays or receives the price difference.
        """
        reservation = self.db.get("reservations", reservation_id, "reservation")
        user = self.db.get("users", reservation["user_id"], "user")
        count = len(reservation["passengers"])
        same_cabin = cabin == reservation["cabin"]
        current = {(leg["flight_number"], leg["date"]): leg for leg in reservation["flights"]}
        kept = {(ref["flight_number"], ref["date"]) for ref in flights} & set(current) if same_cabin else set()
        for key, leg in current.items():
            if key not in kept:
                self._release_seats(leg, reservation["cabin"], count)
        legs = [
            copy.deepcopy(current[(ref["flight_number"], ref["date"])])
            if (ref["flight_number"], ref["date"]) in kept
            else self._take_seats(ref, cabin, count)
            for ref in flights
        ]
        difference = (sum(leg["price"] for leg in legs) - sum(leg["price"] for leg in current.values())) * count
        self._settle(user, reservation, payment_id, difference)
        reservation["flights"] = legs
        reservation["cabin"] = cabin
        return copy.deepcopy(reservation)

    @action(ActionKind.WRITE)
    def update_reservation_baggages(
        self, reservation_id: str, total_baggages: int, nonfree_baggages: int, payment_id: str
    ) -> dict[str, Any]:
        """Add checked bags to a reservation (bags cannot be removed); extra non-free bags cost 50 dollars each.

        Args:
            reservation_id: The reservation id.
            total_baggages: The new total number of checked bags.
            nonfree_baggages: The new number of non-free checked bags.
            payment_id: Payment method from the user's profile for the added non-free bags.
        """
        reservation = self.db.get("reservations", reservation_id, "reservation")
        if total_baggages < reservation["total_baggages"] or nonfree_baggages < reservation["nonfree_baggages"]:
            raise ToolError("checked bags can be added but not removed")
        user = self.db.get("users", reservation["user_id"], "user")
        extra = BAG_PRICE * (nonfree_baggages - reservation["nonfree_baggages"])
        self._settle(user, reservation, payment_id, extra)
        reservation["total_baggages"] = total_baggages
        reservation["nonfree_baggages"] = nonfree_baggages
        return copy.deepcopy(reservation)

    @action(ActionKind.WRITE)
    def update_reservation_passengers(self, reservation_id: str, passengers: list[Passenger]) -> dict[str, Any]:
        """Replace the passengers' details of a reservation; their number cannot change.

        Args:
            reservation_id: The reservation id.
            passengers: Each passenger's first name, last name and date of birth, in order.
        """
        reservation = self.db.get("reservations", reservation_id, "reservation")
        if len(passengers) != len(reservation["passengers"]):
            raise ToolError("the number of passengers cannot change")
        reservation["passengers"] = [dict(p) for p in passengers]
        return copy.deepcopy(reservation)

    @action(ActionKind.WRITE)
    def send_certificate(self, user_id: str, amount: float) -> str:
        """Send a travel certificate to a user as a gesture of goodwill.

        Args:
            user_id: The user id.
            amount: The certificate's value in dollars.
        """
        if amount <= 0:
            raise ToolError("a certificate amount must be positive")
        user = self.db.get("users", user_id, "user")
        key = self.new_id("0123456789", 7, user["payment_methods"], prefix="certificate_")
        user["payment_methods"][key] = {"source": "certificate", "id": key, "amount": amount}
        return f"Certificate {key} of {amount} dollars added to user {user_id}."

    # ----------------------------------------------------------------------------------------- helpers

    def _flight_date(self, flight_number: str, date: str) -> dict[str, Any]:
        flight = self.db.get("flights", flight_number, "flight")
        if date not in flight["dates"]:
            raise ToolError(f"flight {flight_number} does not fly on {date}")
        return flight["dates"][date]

    def _bookable(self, origin: str, destination: str | None, date: str) -> list[str]:
        numbers = []
        for number, flight in self.db.table("flights").items():
            if flight["origin"] != origin or destination not in (None, flight["destination"]):
                continue
            if flight["dates"].get(date, {}).get("status") == "available":
                self.db.touch("flights", number)
                numbers.append(number)
        return numbers

    def _offer(self, number: str, date: str) -> dict[str, Any]:
        flight = self.db.table("flights")[number]
        day = flight["dates"][date]
        return {
            **{key: value for key, value in flight.items() if key != "dates"},
            "date": date,
            "status": day["status"],
            "available_seats": dict(day["available_seats"]),
            "prices": dict(day["prices"]),
        }

    def _take_seats(self, ref: FlightRef, cabin: str, count: int) -> dict[str, Any]:
        day = self._flight_date(ref["flight_number"], ref["date"])
        if day["status"] != "available":
            raise ToolError(f"flight {ref['flight_number']} on {ref['date']} is {day['status']}, not bookable")
        if day["available_seats"][cabin] < count:
            raise ToolError(f"flight {ref['flight_number']} on {ref['date']} has too few {cabin} seats left")
        day["available_seats"][cabin] -= count
        flight = self.db.table("flights")[ref["flight_number"]]
        return {
            "flight_number": ref["flight_number"],
            "date": ref["date"],
            "origin": flight["origin"],
            "destination": flight["destination"],
            "price": day["prices"][cabin],
        }

    def _release_seats(self, leg: dict[str, Any], cabin: str, count: int) -> None:
        flight = self.db.get("flights", leg["flight_number"], "flight")
        day = flight["dates"].get(leg["date"], {})
        if day.get("status") == "available":
            day["available_seats"][cabin] += count

    def _charge(self, user: dict[str, Any], payment_id: str, amount: float) -> None:
        method = user["payment_methods"].get(payment_id)
        if method is None:
            raise ToolError(f"payment method {payment_id} is not in the user's profile")
        if method["source"] in STORED_VALUE:
            if amount > method["amount"] + 1e-6:
                raise ToolError(f"{payment_id} has only {method['amount']} dollars left")
            method["amount"] = round(method["amount"] - amount, 2)

    def _settle(self, user: dict[str, Any], reservation: dict[str, Any], payment_id: str, amount: float) -> None:
        """Charge (positive) or refund (negative) a difference and record it in the payment history."""
        if payment_id not in user["payment_methods"]:
            raise ToolError(f"payment method {payment_id} is not in the user's profile")
        if amount > 0:
            self._charge(user, payment_id, amount)
        elif amount < 0 and user["payment_methods"][payment_id]["source"] == "gift_card":
            method = user["payment_methods"][payment_id]
            method["amount"] = round(method["amount"] - amount, 2)
        if amount:
            reservation["payment_history"].append({"payment_id": payment_id, "amount": amount})
