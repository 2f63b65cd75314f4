{{ config(materialized='table') }}
select id, upper(name) as uname, amount from {{ ref('people') }}
