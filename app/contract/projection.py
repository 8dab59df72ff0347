"""The models of what changes the active history without adding to it: a retraction and a
reset. Field names are the contract."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from app.contract.common import MAX_SEQ, WHOLE_NUMBER, RequestModel


class RetractionRequest(RequestModel):
    seq: Annotated[
        int | None,
        Field(
            ge=1,
            le=MAX_SEQ,
            description="The item to hide; left out (or null), the newest item the active "
            "history shows.",
        ),
        WHOLE_NUMBER,
    ] = None


class RetractedItem(BaseModel):
    seq: int
    item: dict[str, Any] = Field(description="The hidden item as the log holds it.")


class RetractionResponse(BaseModel):
    seq: int = Field(description="The retraction fact's own seq.")
    retracted: list[int] = Field(
        description="Every seq hidden: the one asked for, and the call or outputs paired with it."
    )
    items: list[RetractedItem] = Field(
        description="The hidden items, in seq order, as the log holds them (Responses form)."
    )


class ResetResponse(BaseModel):
    seq: int = Field(description="The reset fact's seq; the active history starts after it.")
