{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id', on_schema_change='sync_all_columns') }}
{#- The second run (`--vars '{codes_as_text: true}'`) changes `code` from a number to text:
    dbt's alter_column_type adds a column, copies, drops the old one and renames the new. -#}
select id, {{ "cast(id * 10 as varchar)" if var('codes_as_text', false) else "id * 10" }} as code
from {{ ref('people') }}
