"""Payment <-> item mapping: SPEC §3's exact attribute names and low-level types."""

from datasource.items import from_item, to_item
from tests.payment_samples import full_payment, sample_payment


def test_a_full_payment_maps_to_every_attribute() -> None:
    payment = full_payment()
    pid = payment.payment_id
    assert to_item(payment) == {
        "PK": {"S": "USER#alice"},
        "SK": {"S": f"LOAN#loan-1#PAYMENT#{pid}"},
        "GSI1PK": {"S": "USER#alice"},
        "GSI1SK": {"S": f"LOAN#loan-1#STATUS#COMPLETED#PAYMENT#{pid}"},
        "GSI2PK": {"S": "PAYMENT"},
        "GSI2SK": {"S": f"STATUS#COMPLETED#PAYMENT#{pid}"},
        "GSI3PK": {"S": "USER#alice"},
        "GSI3SK": {"S": "CONFIRMATION#conf-1"},
        "loc_user_id": {"S": "alice"},
        "loc_loan_id": {"S": "loan-1"},
        "loc_payment_id": {"S": pid},
        "loc_amount": {"N": "12345"},
        "loc_status": {"S": "COMPLETED"},
        "loc_payment_method": {"S": "ach"},
        "loc_process": {"S": "MANUAL"},
        "loc_confirmation_id": {"S": "conf-1"},
        "loc_account_last_four": {"S": "6789"},
        "loc_intended_installment_id": {"S": "inst-1"},
        "loc_payment_attempts": {"N": "1"},
        "loc_applications": {
            "L": [
                {
                    "M": {
                        "payment_id": {"S": pid},
                        "installment_id": {"S": "inst-1"},
                        "amount": {"N": "12000"},
                        "payment_date": {"S": "2026-03-02T16:45:10.456Z"},
                    }
                },
                {
                    "M": {
                        "payment_id": {"S": pid},
                        "installment_id": {"S": "inst-2"},
                        "amount": {"N": "345"},
                        "payment_date": {"S": "2026-03-02T16:45:10.456Z"},
                    }
                },
            ]
        },
        "loc_update_reason": {"S": "customer asked"},
        "loc_created_date": {"S": "2026-03-02T15:30:00.123Z"},
        "loc_last_updated": {"S": "2026-03-02T16:45:10.456Z"},
        "loc_version": {"N": "3"},
        "loc_return_code": {"S": "R01"},
    }


def test_absent_values_are_absent_attributes_and_gsi3_is_sparse() -> None:
    payment = sample_payment(account_last_four=None, intended_installment_id=None)
    item = to_item(payment)
    for name in (
        "GSI3PK",
        "GSI3SK",
        "loc_confirmation_id",
        "loc_account_last_four",
        "loc_intended_installment_id",
        "loc_return_code",
    ):
        assert name not in item
    assert item["loc_applications"] == {"L": []}


def test_items_map_back_to_the_same_payment_with_int_numbers() -> None:
    for payment in (full_payment(), sample_payment(), sample_payment(account_last_four=None)):
        back = from_item(to_item(payment))
        assert back == payment
        assert type(back.amount_cents) is int
        assert all(type(a.amount_cents) is int for a in back.applications)
