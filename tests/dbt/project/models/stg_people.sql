{{ config(materialized='view') }}
select id, name, created_at, amount from {{ ref('people') }}
