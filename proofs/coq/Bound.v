(* OB-BOUND-1 for every N, M, W (specs/overshoot-bound.md): in every reachable
   state of the fine-grained model OB-MODEL-1 (Model.v),
     c_0 + ... + c_{N-1} <= M + (N - 1) * min M W.

   The proof is the paper proof of the spec made local (OB-FINE-1), with ghost
   state that no real step reads:
   * G, the next start rank; rank p, the rank of p's check in progress;
   * per reader x and slot q it has read: rd x q the value read, sn x q the
     rank of the check q had in progress then (0: none), cr x q that check's
     credit, min n M (the most slot q can grow before q starts a later check);
   * the leader, the admitted check with the latest start (rank RL, server L,
     weight nL), with its reads ld, seen ranks sl and credits al.  Before the
     first admission a virtual leader of rank 0 has read zeros.
   The invariant speaks of one (reader, slot) pair at a time (`drift`):
   if q still runs the check the reader saw there, c_q <= read value (and the
   credit is that check's); otherwise c_q <= read value + credit, and q's
   check in progress, if any, started after the reader.  It holds for the
   leader and for every reader that started after the leader ("fresh");
   a reader that started before the leader is the check the leader saw in
   its slot ("stale").  Summing the leader's drift gives the bound.
   Ghost erasure (`ghost_erasure`) lifts every real execution to a ghost one,
   so the theorem is about Model.step itself. *)

From Coq Require Import Arith Bool Lia.
From Queueref Require Import Model.

(* ------------------------------------------------------------------ *)
(* Sums *)

Lemma sum_ext : forall f g k, (forall j, j < k -> f j = g j) -> sum f k = sum g k.
Proof.
  intros f g k; induction k as [|k IH]; simpl; intros H; [reflexivity|].
  rewrite IH by (intros; apply H; lia). rewrite (H k) by lia. reflexivity.
Qed.

Lemma sum_le : forall f g k, (forall j, j < k -> f j <= g j) -> sum f k <= sum g k.
Proof.
  intros f g k; induction k as [|k IH]; simpl; intros H; [lia|].
  specialize (IH (fun j Hj => H j ltac:(lia))). specialize (H k ltac:(lia)). lia.
Qed.

Lemma sum_plus : forall f g k, sum (fun j => f j + g j) k = sum f k + sum g k.
Proof. intros f g k; induction k as [|k IH]; simpl; lia. Qed.

Lemma sum_zero : forall k, sum (fun _ => 0) k = 0.
Proof. induction k as [|k IH]; simpl; lia. Qed.

Lemma sum_upd_out : forall f i v k, k <= i -> sum (upd f i v) k = sum f k.
Proof.
  intros f i v k H; apply sum_ext; intros j Hj; unfold upd.
  destruct (Nat.eqb_spec j i); [lia | reflexivity].
Qed.

(* All terms but term l are at most b: the sum is at most f l + (k - 1) * b. *)
Lemma sum_one_out : forall f b l k,
  l < k -> (forall j, j < k -> j <> l -> f j <= b) -> sum f k <= f l + (k - 1) * b.
Proof.
  intros f b l k; induction k as [|k IH]; intros Hl H; [lia|].
  cbn [sum]. replace (S k - 1) with k by lia.
  destruct (Nat.eq_dec k l) as [->|Hk].
  - assert (sum f l <= l * b); [|lia].
    clear IH Hl. assert (forall j, j < l -> f j <= b) as H' by (intros; apply H; lia).
    clear H. induction l as [|l IHl]; cbn [sum]; [lia|].
    specialize (IHl (fun j Hj => H' j ltac:(lia))). specialize (H' l ltac:(lia)). lia.
  - specialize (IH ltac:(lia) (fun j Hj Hne => H j ltac:(lia) Hne)).
    specialize (H k ltac:(lia) Hk).
    destruct k as [|k]; [lia|]. replace (S k - 1) with k in IH by lia. lia.
Qed.

(* ------------------------------------------------------------------ *)
(* Ghost state *)

Record gstate := mk_g {
  real : state;
  G : nat;                    (* the next start rank; ranks start at 1 *)
  rank : nat -> nat;          (* rank of p's check in progress *)
  rd : nat -> nat -> nat;     (* rd x q: the value x read from slot q *)
  sn : nat -> nat -> nat;     (* sn x q: rank of q's check at that read, 0 if none *)
  cr : nat -> nat -> nat;     (* cr x q: that check's credit *)
  RL : nat;                   (* the leader: rank, server, weight *)
  L : nat;
  nL : nat;
  ld : nat -> nat;            (* the leader's reads, seen ranks, credits *)
  sl : nat -> nat;
  al : nat -> nat
}.

Definition ginit : gstate :=
  mk_g init 1 (fun _ => 0) (fun _ _ => 0) (fun _ _ => 0) (fun _ _ => 0)
    0 0 0 (fun _ => 0) (fun _ => 0) (fun _ => 0).

(* What a read of slot q records: q's check rank and credit, if it has one. *)
Definition seen_rank (s : state) (rk : nat -> nat) (q : nat) : nat :=
  match checks s q with Some _ => rk q | None => 0 end.

Definition credit (M : nat) (s : state) (q : nat) : nat :=
  match checks s q with Some c => Nat.min (ck_n c) M | None => 0 end.

Definition upd2 (f : nat -> nat -> nat) (x q v : nat) : nat -> nat -> nat :=
  upd f x (upd (f x) q v).

(* The ghost step; s' is the real successor. *)
Definition gnext (M : nat) (g : gstate) (a : action) (s' : state) : gstate :=
  let s := real g in
  match a with
  | Start p _ =>
      mk_g s' (S (G g)) (upd (rank g) p (G g)) (rd g) (sn g) (cr g)
        (RL g) (L g) (nL g) (ld g) (sl g) (al g)
  | Read p =>
      match checks s p with
      | Some c =>
          let q := ck_next c in
          mk_g s' (G g) (rank g)
            (upd2 (rd g) p q (slots s q))
            (upd2 (sn g) p q (seen_rank s (rank g) q))
            (upd2 (cr g) p q (credit M s q))
            (RL g) (L g) (nL g) (ld g) (sl g) (al g)
      | None => g
      end
  | Decide p =>
      match checks s p with
      | Some c =>
          if admits M (ck_view c) (ck_n c) && (RL g <? rank g p) then
            mk_g s' (G g) (rank g) (rd g) (sn g) (cr g)
              (rank g p) p (ck_n c) (rd g p) (sn g p) (cr g p)
          else
            mk_g s' (G g) (rank g) (rd g) (sn g) (cr g)
              (RL g) (L g) (nL g) (ld g) (sl g) (al g)
      | None => g
      end
  | Finish _ =>
      mk_g s' (G g) (rank g) (rd g) (sn g) (cr g)
        (RL g) (L g) (nL g) (ld g) (sl g) (al g)
  end.

(* One (reader, slot) pair: reader of rank R read r from slot q, seeing the
   check of rank sq there, with credit a. *)
Definition drift (M : nat) (s : state) (rk : nat -> nat) (q r sq a R : nat) : Prop :=
  match checks s q with
  | Some c =>
      if rk q =? sq then slots s q <= r /\ a = Nat.min (ck_n c) M
      else slots s q <= r + a /\ R < rk q
  | None => slots s q <= r + a
  end.

Definition fresh (N M W : nat) (g : gstate) (x : nat) (c : check) : Prop :=
  ck_next c <= N /\ ck_view c = sum (rd g x) (ck_next c) /\
  forall q, q < ck_next c ->
    sn g x q < G g /\ cr g x q <= Nat.min M W /\
    drift M (real g) (rank g) q (rd g x q) (sn g x q) (cr g x q) (rank g x).

Record inv (N M W : nat) (g : gstate) : Prop := {
  i_weight : forall p c, p < N -> checks (real g) p = Some c -> 1 <= ck_n c <= W;
  i_rank : forall p c, p < N -> checks (real g) p = Some c -> 1 <= rank g p < G g;
  i_distinct : forall p q cp cq, p < N -> q < N -> p <> q ->
    checks (real g) p = Some cp -> checks (real g) q = Some cq -> rank g p <> rank g q;
  i_notRL : forall p c, p < N -> checks (real g) p = Some c -> rank g p <> RL g;
  i_RL : RL g < G g;
  i_L : 0 < N -> L g < N;
  i_sum : sum (ld g) N + nL g <= M;
  i_al : forall j, j < N -> j <> L g -> al g j <= Nat.min M W;
  i_alL : al g (L g) = nL g;
  i_sl : forall j, j < N -> sl g j < G g;
  i_lead : forall j, j < N -> drift M (real g) (rank g) j (ld g j) (sl g j) (al g j) (RL g);
  i_stale : forall x c, x < N -> checks (real g) x = Some c -> rank g x < RL g ->
    sl g x = rank g x;
  i_fresh : forall x c, x < N -> checks (real g) x = Some c -> RL g < rank g x ->
    fresh N M W g x c
}.

Lemma inv_init : forall N M W, inv N M W ginit.
Proof.
  intros N M W; split; simpl; try discriminate; try lia.
  - rewrite sum_zero; lia.
  - intros j _; unfold drift; simpl; lia.
Qed.

(* ------------------------------------------------------------------ *)
(* Preservation, one lemma per kind of step *)

Ltac upd_cases :=
  repeat match goal with
  | |- context [?j =? ?i] => destruct (Nat.eqb_spec j i); subst
  | H : context [?j =? ?i] |- _ => destruct (Nat.eqb_spec j i); subst
  end.

Ltac simpl_g := cbn [real G rank rd sn cr RL L nL ld sl al slots checks
                      ck_n ck_next ck_view gnext upd2] in *.

Lemma inv_start : forall N M W g p n,
  inv N M W g -> p < N -> 1 <= n -> n <= W -> checks (real g) p = None ->
  inv N M W (gnext M g (Start p n) (after_start (real g) p n)).
Proof.
  intros N M W g p n H Hp Hn HW Hc. destruct H.
  unfold after_start; split; simpl_g; unfold upd.
  - intros p' c Hp' Hc'. destruct (Nat.eqb_spec p' p).
    + injection Hc' as <-; simpl; lia.
    + eauto.
  - intros p' c Hp' Hc'. destruct (Nat.eqb_spec p' p).
    + lia.
    + specialize (i_rank0 p' c Hp' Hc'); lia.
  - intros p1 p2 c1 c2 H1 H2 Hne Hc1 Hc2.
    destruct (Nat.eqb_spec p1 p); destruct (Nat.eqb_spec p2 p); subst; try lia.
    + specialize (i_rank0 p2 c2 H2 Hc2); lia.
    + specialize (i_rank0 p1 c1 H1 Hc1); lia.
    + eauto.
  - intros p' c Hp' Hc'. destruct (Nat.eqb_spec p' p); [lia|eauto].
  - lia.
  - exact i_L0.
  - exact i_sum0.
  - exact i_al0.
  - exact i_alL0.
  - intros j Hj; specialize (i_sl0 j Hj); lia.
  - intros j Hj. specialize (i_lead0 j Hj). unfold drift in *; simpl_g; unfold upd.
    destruct (Nat.eqb_spec j p).
    + subst. rewrite Hc in i_lead0. specialize (i_sl0 p Hj).
      destruct (Nat.eqb_spec (G g) (sl g p)); [lia|]. lia.
    + exact i_lead0.
  - intros x c Hx Hc'. destruct (Nat.eqb_spec x p); [lia|eauto].
  - intros x c Hx Hc' Hfr. destruct (Nat.eqb_spec x p).
    + injection Hc' as <-. unfold fresh; simpl_g; unfold first_slot. split; [lia|].
      split; [reflexivity|]. intros; lia.
    + destruct (i_fresh0 x c Hx Hc' Hfr) as (Hk & Hv & Hq). unfold fresh; simpl_g.
      split; [exact Hk|]. split; [exact Hv|].
      intros q Hq'. destruct (Hq q Hq') as (Hs & Hcr & Hd). split; [lia|]. split; [exact Hcr|].
      unfold drift in *; simpl_g; unfold upd. rewrite (proj2 (Nat.eqb_neq x p) n0).
      destruct (Nat.eqb_spec q p).
      * subst. rewrite Hc in Hd. destruct (Nat.eqb_spec (G g) (sn g x p)); [lia|].
        specialize (i_rank0 x c Hx Hc'). lia.
      * exact Hd.
Qed.

(* drift looks at a check only through its weight. *)
Lemma drift_same_shape : forall M s s' rk q r sq a R,
  slots s' q = slots s q -> option_map ck_n (checks s' q) = option_map ck_n (checks s q) ->
  drift M s rk q r sq a R -> drift M s' rk q r sq a R.
Proof.
  intros M s s' rk q r sq a R Hs Hc. unfold drift. rewrite Hs.
  destruct (checks s' q) as [c'|]; destruct (checks s q) as [c|]; simpl in Hc;
    try discriminate; [|trivial].
  injection Hc as Hn. rewrite Hn. trivial.
Qed.

Lemma upd_same : forall A (f : nat -> A) i v, upd f i v i = v.
Proof. intros; unfold upd; rewrite Nat.eqb_refl; reflexivity. Qed.

Lemma upd_other : forall A (f : nat -> A) i v j, j <> i -> upd f i v j = f j.
Proof. intros A f i v j H; unfold upd; destruct (Nat.eqb_spec j i); congruence. Qed.

Lemma upd2_same : forall f x q v, upd2 f x q v x = upd (f x) q v.
Proof. intros; unfold upd2, upd; rewrite Nat.eqb_refl; reflexivity. Qed.

Lemma upd2_other : forall f x q v x', x' <> x -> upd2 f x q v x' = f x'.
Proof. intros f x q v x' H; unfold upd2, upd; destruct (Nat.eqb_spec x' x); congruence. Qed.

Lemma inv_read : forall N M W g p c,
  inv N M W g -> p < N -> checks (real g) p = Some c -> ck_next c < N ->
  inv N M W (gnext M g (Read p) (after_read (real g) p c)).
Proof.
  intros N M W g p c H Hp Hc Hk. destruct H.
  unfold gnext. rewrite Hc. unfold after_read.
  set (c' := mk_check (ck_n c) (next_slot (ck_next c)) (accumulate (ck_view c) (slots (real g) (ck_next c)))).
  assert (Hshape : forall q, option_map ck_n (upd (checks (real g)) p (Some c') q)
                             = option_map ck_n (checks (real g) q)).
  { intros q; unfold upd. destruct (Nat.eqb_spec q p); [subst; rewrite Hc|]; reflexivity. }
  assert (Hsome : forall q d, upd (checks (real g)) p (Some c') q = Some d ->
                  exists d0, checks (real g) q = Some d0 /\ ck_n d0 = ck_n d).
  { intros q d Hq; unfold upd in Hq. destruct (Nat.eqb_spec q p).
    - subst. injection Hq as <-. exists c. split; [exact Hc|reflexivity].
    - exists d. split; [exact Hq|reflexivity]. }
  split; simpl_g.
  - intros p' d Hp' Hd. destruct (Hsome p' d Hd) as (d0 & Hd0 & Hn).
    rewrite <- Hn; eauto.
  - intros p' d Hp' Hd. destruct (Hsome p' d Hd) as (d0 & Hd0 & _). eauto.
  - intros p1 p2 d1 d2 H1 H2 Hne Hd1 Hd2.
    destruct (Hsome p1 d1 Hd1) as (e1 & He1 & _). destruct (Hsome p2 d2 Hd2) as (e2 & He2 & _).
    eauto.
  - intros p' d Hp' Hd. destruct (Hsome p' d Hd) as (d0 & Hd0 & _). eauto.
  - exact i_RL0.
  - exact i_L0.
  - exact i_sum0.
  - exact i_al0.
  - exact i_alL0.
  - exact i_sl0.
  - intros j Hj. apply drift_same_shape with (real g); [reflexivity|apply Hshape|auto].
  - intros x d Hx Hd. destruct (Hsome x d Hd) as (d0 & Hd0 & _). eauto.
  - intros x d Hx Hd Hfr. unfold fresh; simpl_g.
    destruct (Nat.eqb_spec x p).
    + (* the reader itself *)
      subst x. unfold upd in Hd. rewrite Nat.eqb_refl in Hd. injection Hd as <-.
      destruct (i_fresh0 p c Hp Hc Hfr) as (_ & Hv & Hq).
      unfold c'; simpl_g. unfold next_slot, accumulate.
      split; [lia|]. split.
      * rewrite !upd2_same. cbn [sum]. rewrite sum_upd_out by lia.
        unfold upd; rewrite Nat.eqb_refl. lia.
      * intros q Hq'. rewrite !upd2_same. unfold upd at 1 2 3.
        destruct (Nat.eqb_spec q (ck_next c)).
        -- (* the slot just read *)
           subst q. unfold seen_rank, credit. split; [|split].
           ++ destruct (checks (real g) (ck_next c)) eqn:Hq0; [|lia].
              specialize (i_rank0 _ _ Hk Hq0); lia.
           ++ destruct (checks (real g) (ck_next c)) eqn:Hq0; [|lia].
              specialize (i_weight0 _ _ Hk Hq0); lia.
           ++ unfold drift; cbn [slots checks]. unfold upd.
              destruct (Nat.eqb_spec (ck_next c) p).
              ** rewrite e, !Nat.eqb_refl, Hc. cbn [ck_n]. rewrite !Nat.eqb_refl. lia.
              ** destruct (checks (real g) (ck_next c)) eqn:Hq0; rewrite !Nat.eqb_refl; lia.
        -- rewrite (upd_other _ (rd g p) _ _ q n), (upd_other _ (sn g p) _ _ q n),
             (upd_other _ (cr g p) _ _ q n).
           destruct (Hq q ltac:(lia)) as (Hs & Hcr & Hdr). split; [exact Hs|]. split; [exact Hcr|].
           apply drift_same_shape with (real g); [reflexivity| |exact Hdr].
           cbn [checks]; unfold upd; cbv beta.
           destruct (Nat.eqb_spec q p); [subst; rewrite Hc|]; reflexivity.
    + (* another reader *)
      unfold upd in Hd. destruct (Nat.eqb_spec x p); [contradiction|].
      destruct (i_fresh0 x d Hx Hd Hfr) as (Hk' & Hv & Hq).
      rewrite !upd2_other by exact n.
      split; [exact Hk'|]. split; [exact Hv|].
      intros q Hq'. destruct (Hq q Hq') as (Hs & Hcr & Hdr). split; [exact Hs|]. split; [exact Hcr|].
      apply drift_same_shape with (real g); [reflexivity|apply Hshape|exact Hdr].
Qed.

(* After p's admission (or rejection), drift at another slot is unchanged. *)
Lemma drift_other_slot : forall M s s' rk q r sq a R,
  slots s' q = slots s q -> checks s' q = checks s q ->
  drift M s rk q r sq a R -> drift M s' rk q r sq a R.
Proof. intros. apply drift_same_shape with s; [assumption|congruence|assumption]. Qed.

(* A reader that saw p's admitting check: the slot grows by at most its credit. *)
Lemma drift_admit_seen : forall M s rk p c r sq a R,
  checks s p = Some c -> ck_n c <= M -> drift M s rk p r sq a R ->
  (rk p = sq -> slots s p + ck_n c <= r + a) /\ (rk p <> sq -> R < rk p).
Proof.
  intros M s rk p c r sq a R Hc Hn Hd. unfold drift in Hd. rewrite Hc in Hd.
  destruct (Nat.eqb_spec (rk p) sq); split; intros; try lia.
Qed.

Lemma inv_admit : forall N M W g p c,
  inv N M W g -> p < N -> checks (real g) p = Some c -> N <= ck_next c ->
  admits M (ck_view c) (ck_n c) = true ->
  inv N M W (gnext M g (Decide p) (after_admit (real g) p c)).
Proof.
  intros N M W g p c H Hp Hc Hk Ha. pose proof H as H0. destruct H.
  assert (Hn : ck_n c <= M) by (unfold admits in Ha; apply Nat.leb_le in Ha; lia).
  unfold gnext. rewrite Hc, Ha. cbn [andb]. unfold after_admit.
  set (s' := {| slots := upd (slots (real g)) p (slots (real g) p + ck_n c);
                checks := upd (checks (real g)) p None |}).
  assert (Hs_other : forall q, q <> p -> slots s' q = slots (real g) q)
    by (intros; apply upd_other; assumption).
  assert (Hc_other : forall q, q <> p -> checks s' q = checks (real g) q)
    by (intros; apply upd_other; assumption).
  assert (Hc_p : checks s' p = None) by apply upd_same.
  assert (Hs_p : slots s' p = slots (real g) p + ck_n c) by apply upd_same.
  assert (Hbusy : forall q d, checks s' q = Some d -> q <> p /\ checks (real g) q = Some d).
  { intros q d Hq. destruct (Nat.eq_dec q p); [subst; congruence|].
    rewrite Hc_other in Hq by assumption. split; assumption. }
  (* drift at p for a state whose reader saw p's check *)
  assert (Hgrow : forall r sq a R, drift M (real g) (rank g) p r sq a R ->
                  (rank g p = sq -> drift M s' (rank g) p r sq a R) /\
                  (rank g p <> sq -> R < rank g p)).
  { intros r sq a R Hd. destruct (drift_admit_seen M _ _ p c r sq a R Hc Hn Hd) as (H1 & H2).
    split; [|exact H2]. intros Heq. unfold drift. rewrite Hc_p, Hs_p. auto. }
  assert (Hkeep : forall q r sq a R, q <> p -> drift M (real g) (rank g) q r sq a R ->
                  drift M s' (rank g) q r sq a R).
  { intros. apply drift_other_slot with (real g); auto. }
  pose proof (i_notRL0 p c Hp Hc) as HnotRL.
  destruct (Nat.ltb_spec (RL g) (rank g p)) as [Hfr|Hst].
  - (* a fresh reader admits: it becomes the leader *)
    destruct (i_fresh0 p c Hp Hc Hfr) as (Hk' & Hv & Hq).
    assert (Hall : ck_next c = N) by lia. rewrite Hall in Hv, Hq.
    assert (Hown : sn g p p = rank g p /\ cr g p p = ck_n c).
    { destruct (Hq p Hp) as (_ & _ & Hd). unfold drift in Hd. rewrite Hc in Hd.
      destruct (Nat.eqb_spec (rank g p) (sn g p p)); lia. }
    split; cbn [real G rank rd sn cr RL L nL ld sl al].
    + intros q d Hq' Hd. destruct (Hbusy q d Hd). eauto.
    + intros q d Hq' Hd. destruct (Hbusy q d Hd). eauto.
    + intros p1 p2 d1 d2 H1 H2 Hne Hd1 Hd2.
      destruct (Hbusy p1 d1 Hd1). destruct (Hbusy p2 d2 Hd2). eauto.
    + intros q d Hq' Hd. destruct (Hbusy q d Hd). eauto.
    + exact (proj2 (i_rank0 p c Hp Hc)).
    + intros; exact Hp.
    + unfold admits in Ha. apply Nat.leb_le in Ha. lia.
    + intros j Hj Hne. exact (proj1 (proj2 (Hq j Hj))).
    + lia.
    + intros j Hj. exact (proj1 (Hq j Hj)).
    + intros j Hj. destruct (Hq j Hj) as (_ & _ & Hd).
      destruct (Nat.eq_dec j p) as [->|Hne].
      * destruct (Hgrow _ _ _ _ Hd) as (Hg & _). apply Hg. lia.
      * apply Hkeep; assumption.
    + intros x d Hx Hd Hlt. destruct (Hbusy x d Hd) as (Hne & Hd0).
      destruct (Hq x Hx) as (_ & _ & Hdr). unfold drift in Hdr. rewrite Hd0 in Hdr.
      destruct (Nat.eqb_spec (rank g x) (sn g p x)); lia.
    + intros x d Hx Hd Hlt. destruct (Hbusy x d Hd) as (Hne & Hd0).
      destruct (i_fresh0 x d Hx Hd0 ltac:(lia)) as (Hkx & Hvx & Hqx).
      split; [exact Hkx|]. split; [exact Hvx|].
      intros q Hq'. destruct (Hqx q Hq') as (Hs & Hcr & Hdr). split; [exact Hs|].
      split; [exact Hcr|]. cbn [real].
      destruct (Nat.eq_dec q p) as [->|Hqp].
      * destruct (Hgrow _ _ _ _ Hdr) as (Hg & Hlt').
        destruct (Nat.eq_dec (rank g p) (sn g x p)); [apply Hg; assumption|].
        specialize (Hlt' n). lia.
      * apply Hkeep; assumption.
  - (* a stale reader admits: the leader saw its check *)
    assert (Hlt : rank g p < RL g) by lia.
    pose proof (i_stale0 p c Hp Hc Hlt) as Hsl.
    split; cbn [real G rank rd sn cr RL L nL ld sl al].
    + intros q d Hq' Hd. destruct (Hbusy q d Hd). eauto.
    + intros q d Hq' Hd. destruct (Hbusy q d Hd). eauto.
    + intros p1 p2 d1 d2 H1 H2 Hne Hd1 Hd2.
      destruct (Hbusy p1 d1 Hd1). destruct (Hbusy p2 d2 Hd2). eauto.
    + intros q d Hq' Hd. destruct (Hbusy q d Hd). eauto.
    + exact i_RL0.
    + exact i_L0.
    + exact i_sum0.
    + exact i_al0.
    + exact i_alL0.
    + exact i_sl0.
    + intros j Hj. destruct (Nat.eq_dec j p) as [->|Hne].
      * destruct (Hgrow _ _ _ _ (i_lead0 p Hp)) as (Hg & _). apply Hg. lia.
      * apply Hkeep; auto.
    + intros x d Hx Hd Hlt'. destruct (Hbusy x d Hd) as (Hne & Hd0). eauto.
    + intros x d Hx Hd Hfr. destruct (Hbusy x d Hd) as (Hne & Hd0).
      destruct (i_fresh0 x d Hx Hd0 Hfr) as (Hkx & Hvx & Hqx).
      split; [exact Hkx|]. split; [exact Hvx|].
      intros q Hq'. destruct (Hqx q Hq') as (Hs & Hcr & Hdr). split; [exact Hs|].
      split; [exact Hcr|]. cbn [real].
      destruct (Nat.eq_dec q p) as [->|Hqp].
      * destruct (Hgrow _ _ _ _ Hdr) as (Hg & Hlt'').
        destruct (Nat.eq_dec (rank g p) (sn g x p)); [apply Hg; assumption|].
        specialize (Hlt'' n). lia.
      * apply Hkeep; assumption.
Qed.

(* A check that ends without writing leaves every bound in force. *)
Lemma drift_release : forall M s s' rk q r sq a R,
  slots s' q <= slots s q -> checks s' q = None ->
  drift M s rk q r sq a R -> drift M s' rk q r sq a R.
Proof.
  intros M s s' rk q r sq a R Hs Hc Hd. unfold drift in *. rewrite Hc.
  destruct (checks s q); [destruct (rk q =? sq)|]; lia.
Qed.

(* Slots going down keep every bound. *)
Lemma drift_lower : forall M s s' rk q r sq a R,
  slots s' q <= slots s q -> checks s' q = checks s q ->
  drift M s rk q r sq a R -> drift M s' rk q r sq a R.
Proof.
  intros M s s' rk q r sq a R Hs Hc Hd. unfold drift in *. rewrite Hc.
  destruct (checks s q); [destruct (rk q =? sq)|]; lia.
Qed.

Lemma inv_reject : forall N M W g p c,
  inv N M W g -> p < N -> checks (real g) p = Some c -> N <= ck_next c ->
  admits M (ck_view c) (ck_n c) = false ->
  inv N M W (gnext M g (Decide p) (after_reject (real g) p)).
Proof.
  intros N M W g p c H Hp Hc Hk Ha. destruct H.
  unfold gnext. rewrite Hc, Ha. cbn [andb]. unfold after_reject.
  set (s' := {| slots := slots (real g); checks := upd (checks (real g)) p None |}).
  assert (Hbusy : forall q d, checks s' q = Some d -> q <> p /\ checks (real g) q = Some d).
  { intros q d Hq. cbn [checks s'] in Hq. unfold upd in Hq.
    destruct (Nat.eqb_spec q p); [discriminate|]. split; assumption. }
  assert (Hkeep : forall q r sq a R, drift M (real g) (rank g) q r sq a R ->
                  drift M s' (rank g) q r sq a R).
  { intros q r sq a R Hd. destruct (Nat.eq_dec q p) as [->|Hne].
    - apply drift_release with (real g); [cbn; lia|apply upd_same|exact Hd].
    - apply drift_other_slot with (real g); [reflexivity|apply upd_other; exact Hne|exact Hd]. }
  split; cbn [real G rank rd sn cr RL L nL ld sl al].
  - intros q d Hq' Hd. destruct (Hbusy q d Hd). eauto.
  - intros q d Hq' Hd. destruct (Hbusy q d Hd). eauto.
  - intros p1 p2 d1 d2 H1 H2 Hne Hd1 Hd2.
    destruct (Hbusy p1 d1 Hd1). destruct (Hbusy p2 d2 Hd2). eauto.
  - intros q d Hq' Hd. destruct (Hbusy q d Hd). eauto.
  - exact i_RL0.
  - exact i_L0.
  - exact i_sum0.
  - exact i_al0.
  - exact i_alL0.
  - exact i_sl0.
  - intros j Hj. apply Hkeep, i_lead0, Hj.
  - intros x d Hx Hd Hlt. destruct (Hbusy x d Hd). eauto.
  - intros x d Hx Hd Hfr. destruct (Hbusy x d Hd) as (Hne & Hd0).
    destruct (i_fresh0 x d Hx Hd0 Hfr) as (Hkx & Hvx & Hqx).
    split; [exact Hkx|]. split; [exact Hvx|].
    intros q Hq'. destruct (Hqx q Hq') as (Hs & Hcr & Hdr).
    split; [exact Hs|]. split; [exact Hcr|]. apply Hkeep, Hdr.
Qed.

Lemma inv_finish : forall N M W g p,
  inv N M W g -> p < N -> 0 < slots (real g) p ->
  inv N M W (gnext M g (Finish p) (after_finish (real g) p)).
Proof.
  intros N M W g p H Hp Hpos. destruct H.
  unfold gnext, after_finish.
  set (s' := {| slots := upd (slots (real g)) p (finished (slots (real g) p));
                checks := checks (real g) |}).
  assert (Hkeep : forall q r sq a R, drift M (real g) (rank g) q r sq a R ->
                  drift M s' (rank g) q r sq a R).
  { intros q r sq a R Hd. apply drift_lower with (real g); [|reflexivity|exact Hd].
    cbn [slots s']. unfold upd, finished. destruct (Nat.eqb_spec q p); subst; lia. }
  split; cbn [real G rank rd sn cr RL L nL ld sl al].
  - exact i_weight0.
  - exact i_rank0.
  - exact i_distinct0.
  - exact i_notRL0.
  - exact i_RL0.
  - exact i_L0.
  - exact i_sum0.
  - exact i_al0.
  - exact i_alL0.
  - exact i_sl0.
  - intros j Hj. apply Hkeep, i_lead0, Hj.
  - exact i_stale0.
  - intros x d Hx Hd Hfr.
    destruct (i_fresh0 x d Hx Hd Hfr) as (Hkx & Hvx & Hqx).
    split; [exact Hkx|]. split; [exact Hvx|].
    intros q Hq'. destruct (Hqx q Hq') as (Hs & Hcr & Hdr).
    split; [exact Hs|]. split; [exact Hcr|]. apply Hkeep, Hdr.
Qed.

Lemma inv_step : forall N M W g a s',
  inv N M W g -> step N M W (real g) a s' -> inv N M W (gnext M g a s').
Proof.
  intros N M W g a s' H Hs. inversion Hs; subst.
  - apply inv_start; assumption.
  - apply inv_read; assumption.
  - apply inv_admit; assumption.
  - apply (inv_reject N M W g p c); assumption.
  - apply inv_finish; assumption.
Qed.

Lemma gnext_real : forall N M W g a s',
  step N M W (real g) a s' -> real (gnext M g a s') = s'.
Proof.
  intros N M W g a s' Hs. inversion Hs; subst; unfold gnext; try reflexivity;
    match goal with Hc : checks _ _ = Some _ |- _ => rewrite Hc end;
    try reflexivity; destruct (_ && _); reflexivity.
Qed.

(* Ghost erasure: every reachable real state is the real part of a ghost
   state satisfying the invariant. *)
Lemma ghost_erasure : forall N M W s,
  reachable N M W s -> exists g, real g = s /\ inv N M W g.
Proof.
  intros N M W s Hr. induction Hr as [|s a s' Hr IH Hs].
  - exists ginit. split; [reflexivity|apply inv_init].
  - destruct IH as (g & <- & Hi). exists (gnext M g a s'). split.
    + exact (gnext_real N M W g a s' Hs).
    + exact (inv_step N M W g a s' Hi Hs).
Qed.

(* The invariant implies the bound: sum the leader's drift. *)
Lemma bound_of_inv : forall N M W g,
  inv N M W g -> total N (real g) <= M + (N - 1) * Nat.min M W.
Proof.
  intros N M W g H. destruct H. unfold total.
  destruct N as [|N']; [cbn; lia|].
  assert (Hle : sum (slots (real g)) (S N') <= sum (fun j => ld g j + al g j) (S N')).
  { apply sum_le. intros j Hj. specialize (i_lead0 j Hj). unfold drift in i_lead0.
    destruct (checks (real g) j); [destruct (rank g j =? sl g j)|]; lia. }
  rewrite sum_plus in Hle.
  pose proof (sum_one_out (al g) (Nat.min M W) (L g) (S N') ltac:(specialize (i_L0 ltac:(lia)); lia)
                i_al0) as Hal.
  lia.
Qed.

(* OB-BOUND-1, for every N, M and W. *)
Theorem ob_bound_1 : forall N M W s,
  reachable N M W s -> total N s <= M + (N - 1) * Nat.min M W.
Proof.
  intros N M W s Hr. destruct (ghost_erasure N M W s Hr) as (g & <- & Hi).
  exact (bound_of_inv N M W g Hi).
Qed.


