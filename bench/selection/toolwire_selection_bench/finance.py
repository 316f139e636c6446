"""The finance domain: currencies, loans, interest, stock prices and taxes.

Siblings on purpose: converting an amount vs. looking up a rate, a loan's monthly payment vs.
its payoff time, compound vs. simple interest, a stock's current price vs. its history, and
income tax vs. sales tax. Rates and prices are fixed illustrative figures, never market data.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from toolwire import OrchestratorActivatedTool, ToolExecutionResult

UNITS_PER_USD = {
    "USD": 1.0,
    "EUR": 0.92,
    "GBP": 0.79,
    "JPY": 150.0,
    "CHF": 0.88,
    "CAD": 1.36,
    "SEK": 10.5,
    "MXN": 17.0,
}
"""Illustrative fixed rates: the tools are for measuring tool selection, not for money."""


def _usd_rate(code: str) -> float | None:
    return UNITS_PER_USD.get(code.strip().upper())


def _unknown_currency() -> ToolExecutionResult:
    return ToolExecutionResult.context(f"Currencies known here: {', '.join(UNITS_PER_USD)}.")


class MoneyConversion(BaseModel):
    amount: float = Field(description="The amount of money to convert")
    from_currency: str = Field(description="ISO code of the currency the amount is in, e.g. USD")
    to_currency: str = Field(description="ISO code of the currency wanted, e.g. EUR")


class CurrencyConversionTool(OrchestratorActivatedTool[MoneyConversion]):
    """Converts an amount of money from one currency into another."""

    def executable_instruction(self) -> str:
        return "Does the message ask to convert an amount of money into another currency?"

    def execute_with_result(self, params: MoneyConversion, text: str) -> ToolExecutionResult:
        source, target = _usd_rate(params.from_currency), _usd_rate(params.to_currency)
        if source is None or target is None:
            return _unknown_currency()
        converted = params.amount / source * target
        return ToolExecutionResult.context(
            f"{params.amount:,.2f} {params.from_currency} = {converted:,.2f} {params.to_currency}."
        )


class CurrencyPair(BaseModel):
    base: str = Field(description="ISO code of the currency priced, e.g. EUR in EUR/USD")
    quote: str = Field(description="ISO code of the currency it is priced in, e.g. USD")


class ExchangeRateTool(OrchestratorActivatedTool[CurrencyPair]):
    """Looks up the exchange rate between two currencies (the price of one unit)."""

    def executable_instruction(self) -> str:
        return (
            "Does the message ask for the exchange rate between two currencies, rather than "
            "to convert a given amount?"
        )

    def execute_with_result(self, params: CurrencyPair, text: str) -> ToolExecutionResult:
        base, quote = _usd_rate(params.base), _usd_rate(params.quote)
        if base is None or quote is None:
            return _unknown_currency()
        return ToolExecutionResult.context(
            f"1 {params.base} = {quote / base:.4f} {params.quote} (illustrative rate)."
        )


class LoanTerms(BaseModel):
    principal: float = Field(description="The amount borrowed")
    annual_rate_percent: float = Field(description="Yearly interest rate in percent")
    years: float = Field(description="Length of the loan in years")


def _monthly_rate(annual_rate_percent: float) -> float:
    return annual_rate_percent / 100 / 12


class LoanPaymentTool(OrchestratorActivatedTool[LoanTerms]):
    """Computes the monthly repayment of a loan or mortgage over a fixed term."""

    def executable_instruction(self) -> str:
        return (
            "Does the message ask how much the regular (monthly) repayment of a loan or "
            "mortgage is?"
        )

    def execute_with_result(self, params: LoanTerms, text: str) -> ToolExecutionResult:
        months = max(round(params.years * 12), 1)
        rate = _monthly_rate(params.annual_rate_percent)
        if rate == 0:
            payment = params.principal / months
        else:
            payment = params.principal * rate / (1 - (1 + rate) ** -months)
        return ToolExecutionResult.context(f"Monthly payment: {payment:,.2f} over {months} months.")


class LoanBalance(BaseModel):
    balance: float = Field(description="The amount still owed")
    annual_rate_percent: float = Field(description="Yearly interest rate in percent")
    monthly_payment: float = Field(description="The amount paid back every month")


class LoanPayoffTimeTool(OrchestratorActivatedTool[LoanBalance]):
    """Computes how long paying a fixed amount each month takes to clear a debt."""

    def executable_instruction(self) -> str:
        return (
            "Does the message ask how long it takes to pay off a debt or loan when a fixed "
            "amount is paid every month?"
        )

    def execute_with_result(self, params: LoanBalance, text: str) -> ToolExecutionResult:
        rate = _monthly_rate(params.annual_rate_percent)
        interest = params.balance * rate
        if params.monthly_payment <= interest:
            return ToolExecutionResult.context(
                "The payment does not cover the monthly interest: the debt is never paid off."
            )
        if rate == 0:
            months = params.balance / params.monthly_payment
        else:
            months = -math.log(1 - interest / params.monthly_payment) / math.log(1 + rate)
        return ToolExecutionResult.context(f"Paid off after {math.ceil(months)} months.")


class SavingsGrowth(BaseModel):
    principal: float = Field(description="The amount saved or invested at the start")
    annual_rate_percent: float = Field(description="Yearly interest rate in percent")
    years: float = Field(description="How many years the money stays invested")
    times_per_year: int = Field(
        default=1, description="How often interest is compounded per year (12 = monthly)"
    )


class CompoundInterestTool(OrchestratorActivatedTool[SavingsGrowth]):
    """Computes what savings or an investment grow to when the interest is compounded."""

    def executable_instruction(self) -> str:
        return (
            "Does the message ask what savings or an investment grow to with compound "
            "interest (interest earning interest)?"
        )

    def execute_with_result(self, params: SavingsGrowth, text: str) -> ToolExecutionResult:
        periods = max(params.times_per_year, 1)
        growth = (1 + params.annual_rate_percent / 100 / periods) ** (periods * params.years)
        return ToolExecutionResult.context(
            f"Value after {params.years:g} years: {params.principal * growth:,.2f}."
        )


class SimpleInterestTerms(BaseModel):
    principal: float = Field(description="The amount lent or deposited")
    annual_rate_percent: float = Field(description="Yearly interest rate in percent")
    years: float = Field(description="Duration in years (18 months = 1.5)")


class SimpleInterestTool(OrchestratorActivatedTool[SimpleInterestTerms]):
    """Computes simple interest: interest on the original amount only, never compounded."""

    def executable_instruction(self) -> str:
        return "Does the message ask for simple (not compounded) interest on an amount?"

    def execute_with_result(self, params: SimpleInterestTerms, text: str) -> ToolExecutionResult:
        interest = params.principal * params.annual_rate_percent / 100 * params.years
        return ToolExecutionResult.context(f"Simple interest: {interest:,.2f}.")


class Ticker(BaseModel):
    ticker: str = Field(description="The stock's ticker symbol or company name, e.g. AAPL")


class StockQuoteTool(OrchestratorActivatedTool[Ticker]):
    """Gives the current price of a company's shares."""

    def executable_instruction(self) -> str:
        return "Does the message ask for the current price of a stock or share?"

    def execute_with_result(self, params: Ticker, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context(
            f"Current price of {params.ticker.upper()}: not available (synthetic bench tool)."
        )


class PriceHistoryQuery(BaseModel):
    ticker: str = Field(description="The stock's ticker symbol or company name, e.g. AAPL")
    start: str = Field(description="First day of the period, or the one past date asked about")
    end: str | None = Field(default=None, description="Last day of the period, if a period")


class StockHistoryTool(OrchestratorActivatedTool[PriceHistoryQuery]):
    """Gives a stock's past prices: on a past date or over a past period."""

    def executable_instruction(self) -> str:
        return (
            "Does the message ask what a stock's price was on a past date, or how it moved over "
            "a past period?"
        )

    def execute_with_result(self, params: PriceHistoryQuery, text: str) -> ToolExecutionResult:
        period = f"{params.start} to {params.end}" if params.end else params.start
        return ToolExecutionResult.context(
            f"Price history of {params.ticker.upper()} for {period}: not available "
            "(synthetic bench tool)."
        )


class IncomeTaxQuery(BaseModel):
    annual_income: float = Field(description="Taxable income per year")
    country: str = Field(description="Country (or state) whose tax rules apply")


class IncomeTaxTool(OrchestratorActivatedTool[IncomeTaxQuery]):
    """Estimates the income tax owed on a yearly salary or income."""

    def executable_instruction(self) -> str:
        return "Does the message ask how much income tax is owed on a salary or yearly income?"

    def execute_with_result(self, params: IncomeTaxQuery, text: str) -> ToolExecutionResult:
        return ToolExecutionResult.context(
            f"Income tax on {params.annual_income:,.0f} in {params.country}: no tax tables in "
            "this synthetic bench tool."
        )


class PurchaseTaxQuery(BaseModel):
    price: float = Field(description="Price of the purchase before tax")
    rate_percent: float | None = Field(
        default=None, description="Sales tax or VAT rate in percent, when the message gives it"
    )
    region: str | None = Field(default=None, description="Country or state of the purchase")


class SalesTaxTool(OrchestratorActivatedTool[PurchaseTaxQuery]):
    """Computes the sales tax or VAT added to the price of a purchase."""

    def executable_instruction(self) -> str:
        return "Does the message ask for the sales tax or VAT on the price of a purchase?"

    def execute_with_result(self, params: PurchaseTaxQuery, text: str) -> ToolExecutionResult:
        if params.rate_percent is None:
            where = f" in {params.region}" if params.region else ""
            return ToolExecutionResult.context(
                f"No sales tax rate known{where} in this synthetic bench tool."
            )
        tax = params.price * params.rate_percent / 100
        return ToolExecutionResult.context(
            f"Sales tax: {tax:,.2f}; total {params.price + tax:,.2f}."
        )
