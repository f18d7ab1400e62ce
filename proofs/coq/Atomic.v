(* The atomic-snapshot model (specs/overshoot-bound.md, OB-ATOMIC-1): the
   same as OB-MODEL-1 but a check reads all N slots in one step (an MGET-like
   snapshot); the write of an admitted request comes later, with other
   servers acting in between.  It decides and finishes with the step
   functions of Model.v (admits, finished).

   Corollary (`atomic_refines_fine`): every reachable atomic state is, slot
   for slot, a reachable state of the fine model -- a snapshot is N reads in
   a row with nobody acting in between -- so OB-BOUND-1 (Bound.v) holds for
   it: `atomic_bound`.  (The safe variant in which the n children of one
   admission are written one per step while the check stays open is
   Children.v.) *)

From Coq Require Import Arith Lia.
From Queueref Require Import Model Bound.

(* A check in progress: its weight and, once taken, the snapshot. *)
Record acheck := mk_acheck { a_n : nat; a_view : option nat }.

Record astate := mk_astate { a_slots : nat -> nat; a_checks : nat -> option acheck }.

Definition ainit : astate := mk_astate (fun _ => 0) (fun _ => None).

Definition snapshot (N : nat) (s : astate) : nat := sum (a_slots s) N.

Section Atomic.
  Variables N M W : nat.

  Inductive astep : astate -> astate -> Prop :=
  | astep_start : forall s p n,
      p < N -> 1 <= n -> n <= W -> a_checks s p = None ->
      astep s (mk_astate (a_slots s) (upd (a_checks s) p (Some (mk_acheck n None))))
  | astep_snapshot : forall s p n,
      p < N -> a_checks s p = Some (mk_acheck n None) ->
      astep s (mk_astate (a_slots s)
                 (upd (a_checks s) p (Some (mk_acheck n (Some (snapshot N s))))))
  | astep_admit : forall s p n v,
      p < N -> a_checks s p = Some (mk_acheck n (Some v)) -> admits M v n = true ->
      astep s (mk_astate (upd (a_slots s) p (a_slots s p + n)) (upd (a_checks s) p None))
  | astep_reject : forall s p n v,
      p < N -> a_checks s p = Some (mk_acheck n (Some v)) -> admits M v n = false ->
      astep s (mk_astate (a_slots s) (upd (a_checks s) p None))
  | astep_finish : forall s p,
      p < N -> 0 < a_slots s p ->
      astep s (mk_astate (upd (a_slots s) p (finished (a_slots s p))) (a_checks s)).

  Inductive areachable : astate -> Prop :=
  | areach_init : areachable ainit
  | areach_step : forall s s', areachable s -> astep s s' -> areachable s'.

  (* The fine state that stands for an atomic one: same slots; a check not yet
     read is at slot 0 with view 0, a snapshot check has read every slot. *)
  Definition sim (a : astate) (s : state) : Prop :=
    (forall q, slots s q = a_slots a q) /\
    forall q, q < N ->
      match a_checks a q, checks s q with
      | None, None => True
      | Some ac, Some c =>
          ck_n c = a_n ac /\
          match a_view ac with
          | None => ck_next c = 0 /\ ck_view c = 0
          | Some v => N <= ck_next c /\ ck_view c = v
          end
      | _, _ => False
      end.

  Lemma sum_shift : forall f j k,
    sum (fun i => f (j + i)) (S k) = f j + sum (fun i => f (S j + i)) k.
  Proof.
    intros f j k; induction k as [|k IH].
    - cbn [sum]. rewrite Nat.add_0_r. lia.
    - cbn [sum] in *. rewrite IH. replace (j + S k) with (S j + k) by lia. lia.
  Qed.

  (* k reads in a row by p, nobody else acting. *)
  Lemma reads_reach : forall k s p c,
    reachable N M W s -> p < N -> checks s p = Some c -> ck_next c + k = N ->
    exists s', reachable N M W s' /\ slots s' = slots s /\
      (forall q, q <> p -> checks s' q = checks s q) /\
      exists c', checks s' p = Some c' /\ ck_n c' = ck_n c /\ ck_next c' = N /\
        ck_view c' = ck_view c + sum (fun i => slots s (ck_next c + i)) k.
  Proof.
    induction k as [|k IH]; intros s p c Hr Hp Hc Hk.
    - exists s. split; [exact Hr|]. split; [reflexivity|]. split; [reflexivity|].
      exists c. cbn [sum]. split; [exact Hc|]. split; [reflexivity|]. split; lia.
    - set (s1 := after_read s p c).
      assert (Hs1 : reachable N M W s1).
      { apply reach_step with s (Read p); [exact Hr|]. apply step_read; auto. lia. }
      destruct (IH s1 p (mk_check (ck_n c) (next_slot (ck_next c))
                           (accumulate (ck_view c) (slots s (ck_next c)))))
        as (s' & Hr' & Hsl & Hoth & c' & Hc' & Hn' & Hk' & Hv'); auto.
      { unfold s1, after_read. cbn [checks]. apply upd_same. }
      { cbn [ck_next]. unfold next_slot. lia. }
      exists s'. split; [exact Hr'|]. split; [exact Hsl|]. split.
      + intros q Hq. rewrite Hoth by exact Hq. unfold s1, after_read. cbn [checks].
        apply upd_other; exact Hq.
      + exists c'. split; [exact Hc'|]. split; [exact Hn'|]. split; [exact Hk'|].
        rewrite Hv', sum_shift. cbn [ck_view ck_next]. unfold accumulate, next_slot.
        unfold s1, after_read. cbn [slots]. lia.
  Qed.

  Lemma sim_step : forall a a' s,
    reachable N M W s -> sim a s -> astep a a' -> exists s', reachable N M W s' /\ sim a' s'.
  Proof.
    intros a a' s Hr (Hsl & Hck) Hst. destruct Hst as
      [a p n Hp Hn HW Ha | a p n Hp Ha | a p n v Hp Ha Hadm | a p n v Hp Ha Hadm | a p Hp Hpos].
    - (* start *)
      pose proof (Hck p Hp) as Hq. rewrite Ha in Hq.
      destruct (checks s p) eqn:Hc; [contradiction|].
      exists (after_start s p n). split.
      + apply reach_step with s (Start p n); [exact Hr|]. apply step_start; auto.
      + split; [exact Hsl|]. intros q Hq'. cbn [a_checks checks].
        destruct (Nat.eq_dec q p) as [->|Hne].
        * unfold after_start; cbn [a_checks checks]. rewrite !upd_same. cbn. unfold first_slot. lia.
        * unfold after_start; cbn [checks]. rewrite !upd_other by exact Hne. apply Hck, Hq'.
    - (* snapshot: N reads in a row *)
      pose proof (Hck p Hp) as Hq. rewrite Ha in Hq.
      destruct (checks s p) as [c|] eqn:Hc; [|contradiction]. cbn [a_n a_view] in Hq.
      destruct Hq as (Hn & Hk & Hv).
      destruct (reads_reach N s p c Hr Hp Hc ltac:(lia))
        as (s' & Hr' & Hsl' & Hoth & c' & Hc' & Hn' & Hk' & Hv').
      exists s'. split; [exact Hr'|]. split.
      + intros q. rewrite Hsl'. apply Hsl.
      + intros q Hq'. cbn [a_checks]. destruct (Nat.eq_dec q p).
        * subst q. rewrite upd_same, Hc'. cbn [a_n a_view]. split; [lia|]. split; [lia|].
          rewrite Hv', Hv, Hk. unfold snapshot. cbn [a_slots]. apply sum_ext.
          intros i Hi. apply Hsl.
        * rewrite upd_other, Hoth by assumption. apply Hck, Hq'.
    - (* admit *)
      pose proof (Hck p Hp) as Hq. rewrite Ha in Hq.
      destruct (checks s p) as [c|] eqn:Hc; [|contradiction]. cbn [a_n a_view] in Hq.
      destruct Hq as (Hn & Hk & Hv).
      exists (after_admit s p c). split.
      + apply reach_step with s (Decide p); [exact Hr|].
        apply step_admit; auto. rewrite Hn, Hv. exact Hadm.
      + split.
        * intros q. unfold after_admit; cbn [slots a_slots]. unfold upd. rewrite Hn, !Hsl.
          reflexivity.
        * intros q Hq'. unfold after_admit; cbn [a_checks checks].
          destruct (Nat.eq_dec q p) as [->|Hne].
          -- rewrite !upd_same. trivial.
          -- rewrite !upd_other by exact Hne. apply Hck, Hq'.
    - (* reject *)
      pose proof (Hck p Hp) as Hq. rewrite Ha in Hq.
      destruct (checks s p) as [c|] eqn:Hc; [|contradiction]. cbn [a_n a_view] in Hq.
      destruct Hq as (Hn & Hk & Hv).
      exists (after_reject s p). split.
      + apply reach_step with s (Decide p); [exact Hr|].
        apply (step_reject N M W s p c); auto. rewrite Hn, Hv. exact Hadm.
      + split; [exact Hsl|].
        intros q Hq'. unfold after_reject; cbn [a_checks checks].
        destruct (Nat.eq_dec q p) as [->|Hne].
        * rewrite !upd_same. trivial.
        * rewrite !upd_other by exact Hne. apply Hck, Hq'.
    - (* finish *)
      exists (after_finish s p). split.
      + apply reach_step with s (Finish p); [exact Hr|]. apply step_finish; auto.
        rewrite Hsl. exact Hpos.
      + split.
        * intros q. unfold after_finish; cbn [slots a_slots]. unfold upd. rewrite !Hsl.
          reflexivity.
        * exact Hck.
  Qed.

  (* OB-ATOMIC-1: every atomic execution is an execution of the fine model. *)
  Theorem atomic_refines_fine : forall a,
    areachable a -> exists s, reachable N M W s /\ sim a s.
  Proof.
    intros a Hr. induction Hr as [|a a' Hr IH Hst].
    - exists init. split; [apply reach_init|]. split; [reflexivity|].
      intros q _. cbn. trivial.
    - destruct IH as (s & Hs & Hsim). exact (sim_step a a' s Hs Hsim Hst).
  Qed.

  (* OB-ATOMIC-1, hence OB-BOUND-1 for the atomic-snapshot model. *)
  Theorem atomic_bound : forall a,
    areachable a -> sum (a_slots a) N <= M + (N - 1) * Nat.min M W.
  Proof.
    intros a Hr. destruct (atomic_refines_fine a Hr) as (s & Hs & Hsl & _).
    rewrite <- (sum_ext (slots s) (a_slots a) N (fun q _ => Hsl q)).
    exact (ob_bound_1 N M W s Hs).
  Qed.
End Atomic.
