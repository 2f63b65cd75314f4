{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id') }}
select id, name, created_at from {{ ref('people') }}
