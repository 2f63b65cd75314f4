"""dbt's cross-database macros (`dbt-tests-adapter`'s utils suite), as dbt-altertable
renders them: dbt-duckdb's macros, so DuckDB's SQL (`date_diff`, `n * INTERVAL`,
`string_split`, `list_aggr`, `generate_series`, …) run through the server."""

import pytest
from conftest import CascadeCleanUp
from dbt.tests.adapter.utils.test_any_value import BaseAnyValue
from dbt.tests.adapter.utils.test_array_append import BaseArrayAppend
from dbt.tests.adapter.utils.test_array_concat import BaseArrayConcat
from dbt.tests.adapter.utils.test_array_construct import BaseArrayConstruct
from dbt.tests.adapter.utils.test_bool_or import BaseBoolOr
from dbt.tests.adapter.utils.test_cast import BaseCast
from dbt.tests.adapter.utils.test_cast_bool_to_text import BaseCastBoolToText
from dbt.tests.adapter.utils.test_concat import BaseConcat
from dbt.tests.adapter.utils.test_current_timestamp import BaseCurrentTimestampAware
from dbt.tests.adapter.utils.test_date import BaseDate
from dbt.tests.adapter.utils.test_date_spine import BaseDateSpine
from dbt.tests.adapter.utils.test_date_trunc import BaseDateTrunc
from dbt.tests.adapter.utils.test_dateadd import BaseDateAdd
from dbt.tests.adapter.utils.test_datediff import BaseDateDiff
from dbt.tests.adapter.utils.test_equals import BaseEquals
from dbt.tests.adapter.utils.test_escape_single_quotes import (
    BaseEscapeSingleQuotesQuote,
)
from dbt.tests.adapter.utils.test_except import BaseExcept
from dbt.tests.adapter.utils.test_generate_series import BaseGenerateSeries
from dbt.tests.adapter.utils.test_get_intervals_between import BaseGetIntervalsBetween
from dbt.tests.adapter.utils.test_get_powers_of_two import BaseGetPowersOfTwo
from dbt.tests.adapter.utils.test_hash import BaseHash
from dbt.tests.adapter.utils.test_intersect import BaseIntersect
from dbt.tests.adapter.utils.test_last_day import BaseLastDay
from dbt.tests.adapter.utils.test_length import BaseLength
from dbt.tests.adapter.utils.test_listagg import BaseListagg
from dbt.tests.adapter.utils.test_null_compare import (
    BaseMixedNullCompare,
    BaseNullCompare,
)
from dbt.tests.adapter.utils.test_position import BasePosition
from dbt.tests.adapter.utils.test_replace import BaseReplace
from dbt.tests.adapter.utils.test_right import BaseRight
from dbt.tests.adapter.utils.test_safe_cast import BaseSafeCast
from dbt.tests.adapter.utils.test_split_part import BaseSplitPart
from dbt.tests.adapter.utils.test_string_literal import BaseStringLiteral


class TestAnyValue(CascadeCleanUp, BaseAnyValue):
    pass


class TestArrayAppend(CascadeCleanUp, BaseArrayAppend):
    pass


class TestArrayConcat(CascadeCleanUp, BaseArrayConcat):
    pass


class TestArrayConstruct(CascadeCleanUp, BaseArrayConstruct):
    pass


class TestBoolOr(CascadeCleanUp, BaseBoolOr):
    pass


class TestCast(CascadeCleanUp, BaseCast):
    pass


class TestCastBoolToText(CascadeCleanUp, BaseCastBoolToText):
    pass


class TestConcat(CascadeCleanUp, BaseConcat):
    pass


class TestCurrentTimestamp(CascadeCleanUp, BaseCurrentTimestampAware):
    pass


class TestDate(CascadeCleanUp, BaseDate):
    pass


@pytest.mark.xfail(
    strict=True,
    reason="the fixture adds an INTERVAL to a string literal ('2023-09-01'), which DuckDB refuses too (no '+' for STRING_LITERAL, INTERVAL)",
)
class TestDateSpine(CascadeCleanUp, BaseDateSpine):
    pass


class TestDateTrunc(CascadeCleanUp, BaseDateTrunc):
    pass


class TestDateAdd(CascadeCleanUp, BaseDateAdd):
    pass


class TestDateDiff(CascadeCleanUp, BaseDateDiff):
    pass


class TestEquals(CascadeCleanUp, BaseEquals):
    pass


class TestEscapeSingleQuotesQuote(CascadeCleanUp, BaseEscapeSingleQuotesQuote):
    pass


class TestExcept(CascadeCleanUp, BaseExcept):
    pass


class TestGenerateSeries(CascadeCleanUp, BaseGenerateSeries):
    pass


@pytest.mark.xfail(
    strict=True,
    reason="the fixture casts '09/01/2023' to a timestamp, which DuckDB refuses too (Conversion Error: expected YYYY-MM-DD)",
)
class TestGetIntervalsBetween(CascadeCleanUp, BaseGetIntervalsBetween):
    pass


class TestGetPowersOfTwo(CascadeCleanUp, BaseGetPowersOfTwo):
    pass


class TestHash(CascadeCleanUp, BaseHash):
    pass


class TestIntersect(CascadeCleanUp, BaseIntersect):
    pass


class TestLastDay(CascadeCleanUp, BaseLastDay):
    pass


class TestLength(CascadeCleanUp, BaseLength):
    pass


class TestListagg(CascadeCleanUp, BaseListagg):
    pass


class TestMixedNullCompare(CascadeCleanUp, BaseMixedNullCompare):
    pass


class TestNullCompare(CascadeCleanUp, BaseNullCompare):
    pass


class TestPosition(CascadeCleanUp, BasePosition):
    pass


class TestReplace(CascadeCleanUp, BaseReplace):
    pass


class TestRight(CascadeCleanUp, BaseRight):
    pass


class TestSafeCast(CascadeCleanUp, BaseSafeCast):
    pass


class TestSplitPart(CascadeCleanUp, BaseSplitPart):
    pass


class TestStringLiteral(CascadeCleanUp, BaseStringLiteral):
    pass
