(* OB-MODEL-1: the fine-grained model loses no capacity.  From every reachable
   state, some execution ends every check in progress and empties every slot:
   the state where all N servers are idle and every slot is 0 is reachable
   again (slot for slot; `drain`).  It depends on a finish lowering the slot by
   one (mutant "finish-keeps-the-slot" of proofs/coq/theorems.json fails in
   `finish_all`) -- OB-BOUND-1 does not, as a bound on the slots only gets
   easier when they never go down.  Contrast OB-BROKEN-3, where a crashed
   server's slot is never cleared. *)

From Coq Require Import Arith Lia.
From Queueref Require Import Model Bound Atomic.

Section Drain.
  Variables N M W : nat.

  (* p's finishes, one at a time, empty its slot. *)
  Lemma finish_all : forall k s p,
    reachable N M W s -> p < N -> slots s p = k ->
    exists s', reachable N M W s' /\ slots s' p = 0 /\
      (forall q, q <> p -> slots s' q = slots s q) /\ (forall q, checks s' q = checks s q).
  Proof.
    induction k as [|k IH]; intros s p Hr Hp Hk.
    - exists s. repeat split; auto.
    - set (s1 := after_finish s p).
      assert (Hr1 : reachable N M W s1).
      { apply reach_step with s (Finish p); [exact Hr|]. apply step_finish; [exact Hp|lia]. }
      destruct (IH s1 p Hr1 Hp) as (s' & Hr' & H0 & Hsl & Hck).
      { unfold s1, after_finish. cbn [slots]. rewrite upd_same. unfold finished. lia. }
      exists s'. split; [exact Hr'|]. split; [exact H0|]. split.
      + intros q Hq. rewrite Hsl by exact Hq. unfold s1, after_finish. cbn [slots].
        apply upd_other, Hq.
      + intros q. rewrite Hck. reflexivity.
  Qed.

  (* p's check in progress, if any, reads what is left and decides. *)
  Lemma end_check : forall s p,
    reachable N M W s -> p < N ->
    exists s', reachable N M W s' /\ checks s' p = None /\
      forall q, q <> p -> slots s' q = slots s q /\ checks s' q = checks s q.
  Proof.
    intros s p Hr Hp. destruct (checks s p) as [c|] eqn:Hc.
    - (* read the remaining slots, then decide *)
      assert (Hread : exists s1 c1, reachable N M W s1 /\ checks s1 p = Some c1 /\
                N <= ck_next c1 /\ slots s1 = slots s /\
                forall q, q <> p -> checks s1 q = checks s q).
      { destruct (Nat.le_gt_cases N (ck_next c)) as [Hdone|Hleft].
        - exists s, c. repeat split; auto.
        - destruct (reads_reach N M W (N - ck_next c) s p c Hr Hp Hc ltac:(lia))
            as (s1 & Hr1 & Hsl1 & Hoth1 & c1 & Hc1 & _ & Hk1 & _).
          exists s1, c1. repeat split; auto. lia. }
      destruct Hread as (s1 & c1 & Hr1 & Hc1 & Hk1 & Hsl1 & Hoth1).
      destruct (admits M (ck_view c1) (ck_n c1)) eqn:Ha.
      + exists (after_admit s1 p c1). split.
        * apply reach_step with s1 (Decide p); [exact Hr1|]. apply step_admit; auto.
        * unfold after_admit; cbn [slots checks]. split; [apply upd_same|].
          intros q Hq. rewrite !upd_other by exact Hq. rewrite Hsl1. split; auto.
      + exists (after_reject s1 p). split.
        * apply reach_step with s1 (Decide p); [exact Hr1|].
          apply (step_reject N M W s1 p c1); auto.
        * unfold after_reject; cbn [slots checks]. split; [apply upd_same|].
          intros q Hq. rewrite !upd_other by exact Hq. rewrite Hsl1. split; auto.
    - exists s. split; [exact Hr|]. split; [exact Hc|]. auto.
  Qed.

  Lemma drain_upto : forall k, k <= N -> forall s, reachable N M W s ->
    exists s', reachable N M W s' /\ forall q, q < k -> slots s' q = 0 /\ checks s' q = None.
  Proof.
    induction k as [|k IH]; intros Hk s Hr.
    - exists s. split; [exact Hr|]. intros; lia.
    - destruct (IH ltac:(lia) s Hr) as (s1 & Hr1 & Hdone1).
      destruct (end_check s1 k Hr1 ltac:(lia)) as (s2 & Hr2 & Hc2 & Hoth2).
      destruct (finish_all (slots s2 k) s2 k Hr2 ltac:(lia) eq_refl)
        as (s3 & Hr3 & H03 & Hsl3 & Hck3).
      exists s3. split; [exact Hr3|]. intros q Hq.
      destruct (Nat.eq_dec q k) as [->|Hne].
      + split; [exact H03|]. rewrite Hck3. exact Hc2.
      + destruct (Hdone1 q ltac:(lia)) as (Hs1 & Hc1).
        destruct (Hoth2 q Hne) as (Hs2 & Hcq2).
        rewrite Hsl3 by exact Hne. rewrite Hck3, Hs2, Hcq2. split; assumption.
  Qed.

  (* OB-MODEL-1: from every reachable state, every check can end and every slot empty. *)
  Theorem drain : forall s, reachable N M W s ->
    exists s', reachable N M W s' /\ forall q, q < N -> slots s' q = 0 /\ checks s' q = None.
  Proof. intros s Hr. exact (drain_upto N (le_n N) s Hr). Qed.
End Drain.
