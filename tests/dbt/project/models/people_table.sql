{{ config(materialized='table') }}
select id, upper(name) as uname, amount from {{ ref('stg_people') }}
