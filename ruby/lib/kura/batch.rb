# frozen_string_literal: true

# The Ruby half of Kura::Batch: the operations of `db.batch { |b| ... }`, written by
# `DB#write`. `put`/`delete` check and copy their arguments at once (TypeError for a key
# that is not a String or Symbol), so a batch never holds a reference into Ruby strings.

module Kura
  class Batch
    private :_put, :_delete

    def put(key, value)
      _put(key, value)
      self
    end
    alias []= put
    alias store put

    def delete(key)
      _delete(key)
      self
    end

    alias length size

    def empty?
      size.zero?
    end
  end
end
